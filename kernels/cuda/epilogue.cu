// bias + dropout + residual in one pass (see epilogue.h).
//
// Design notes
// - One read of z and residual, one write of out; the bias row stays in L1/L2.
// - The vector path needs cols % 8 == 0 (a group of 8 never straddles a row)
//   and aligned pointers; otherwise the scalar path of the same kernel runs.
// - The mask is model::dropout on the f32 value, as on the CPU backend.
#include <cuda_runtime.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/vec.cuh"
#include "model/ops.h"

namespace coconet::kernels::cuda {
namespace {

template <typename T>
struct EpiloguePtrs {
  const T* z;
  const T* bias;
  const T* residual;
  T* out;
  std::int64_t n;
  std::int64_t cols;
  std::uint64_t index_base;
  float p;
  std::uint64_t seed;
  bool vec;
};

template <typename T>
__device__ __forceinline__ float epilogue_value(const EpiloguePtrs<T>& a, std::int64_t i, float z,
                                                float b, float r) {
  return model::dropout(z + b, a.p, a.seed, a.index_base + static_cast<std::uint64_t>(i)) + r;
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads) epilogue_kernel(EpiloguePtrs<T> a) {
  auto one = [&](std::int64_t i) {
    a.out[i] = from_f32<T>(
        epilogue_value(a, i, to_f32(a.z[i]), to_f32(a.bias[i % a.cols]), to_f32(a.residual[i])));
  };
  auto group = [&](std::int64_t i) {
    float z[kVecElems], b[kVecElems], r[kVecElems];
    load_vec(a.z + i, z);
    load_vec(a.bias + i % a.cols, b);
    load_vec(a.residual + i, r);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) z[k] = epilogue_value(a, i + k, z[k], b[k], r[k]);
    store_vec(a.out + i, z);
  };
  if (a.vec)
    for_each_vec(a.n, group, one);
  else
    for_each_scalar(a.n, one);
}

}  // namespace

void validate(const EpilogueArgs& a) {
  const std::int64_t n = a.rows * a.cols;
  require_size(a.z, n, "bias_dropout_residual z");
  require_size(a.bias, a.cols, "bias_dropout_residual bias");
  require_size(a.residual, n, "bias_dropout_residual residual");
  require_size(a.out, n, "bias_dropout_residual out");
  require_same_dtype(a.z, a.bias, "bias_dropout_residual z and bias");
  require_same_dtype(a.z, a.residual, "bias_dropout_residual z and residual");
  require_same_dtype(a.z, a.out, "bias_dropout_residual z and out");
  if (!(a.p >= 0.0f && a.p < 1.0f))
    throw UserError("bias_dropout_residual: dropout probability must be in [0, 1)");
}

void bias_dropout_residual(const EpilogueArgs& a, cudaStream_t stream) {
  validate(a);
  const std::int64_t n = a.rows * a.cols;
  if (n == 0) return;
  with_storage(a.z.dtype, [&](auto tag) {
    using T = decltype(tag);
    EpiloguePtrs<T> p{static_cast<const T*>(a.z.data),
                      static_cast<const T*>(a.bias.data),
                      static_cast<const T*>(a.residual.data),
                      static_cast<T*>(a.out.data),
                      n,
                      a.cols,
                      static_cast<std::uint64_t>(a.first_row * a.cols),
                      a.p,
                      a.seed,
                      false};
    p.vec = a.cols % kVecElems == 0 && aligned16(p.z) && aligned16(p.bias) &&
            aligned16(p.residual) && aligned16(p.out);
    const std::int64_t items = p.vec ? (n + kVecElems - 1) / kVecElems : n;
    const int grid = grid_for_kernel(static_cast<void (*)(decltype(p))>(epilogue_kernel), items);
    epilogue_kernel<<<grid, kBlockThreads, 0, stream>>>(p);
    COCONET_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace coconet::kernels::cuda
