// Row reduction kernel (see rowreduce.h).
//
// Design notes
// - One warp per row, lanes striding the row's columns, then a butterfly
//   shuffle: simple and enough for LayerNorm's and softmax's rows (hidden
//   sizes of thousands); the rows of a grid-stride loop cover any count.
// - The order of additions differs from the cpu backend's row order, so f32
//   sums of non-integer values may differ in the last bits; integer-valued
//   inputs (the verifiers') sum exactly in either order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/check.h"
#include "kernels/cuda/grid.h"
#include "kernels/cuda/rowreduce.h"
#include "kernels/cuda/vec.cuh"
#include "model/error.h"

namespace coconet::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float combine(bool max, float a, float b) {
  return max ? (a > b ? a : b) : a + b;  // max as model::apply_binary's
}

__global__ void row_reduce_kernel(const void* in, model::DType in_t, void* out, model::DType out_t,
                                  std::int64_t rows, std::int64_t inner, bool max) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t warps_per_grid = std::int64_t(gridDim.x) * (blockDim.x / kWarp);
  const std::int64_t first = std::int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  for (std::int64_t row = first; row < rows; row += warps_per_grid) {
    float acc = max ? -INFINITY : 0.0f;
    for (std::int64_t k = lane; k < inner; k += kWarp)
      acc = combine(max, acc, load_elem(in, in_t, row * inner + k));
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      acc = combine(max, acc, __shfl_xor_sync(kFullMask, acc, offset));
    if (lane == 0) store_elem(out, out_t, row, acc);
  }
}

}  // namespace

void row_reduce(const DeviceView& in, const DeviceView& out, std::int64_t inner, model::ReduceOp op,
                cudaStream_t stream) {
  COCONET_ASSERT(op == model::ReduceOp::sum || op == model::ReduceOp::max,
                 "row reduction: sum or max");
  require_size(in, out.size * inner, "row reduction input");
  if (out.size == 0) return;
  const int blocks = blocks_for(out.size * kWarp, kBlockThreads);
  row_reduce_kernel<<<blocks, kBlockThreads, 0, stream>>>(
      in.data, in.dtype, out.data, out.dtype, out.size, inner, op == model::ReduceOp::max);
  COCONET_CUDA_CHECK_LAUNCH();
}

}  // namespace coconet::kernels::cuda
