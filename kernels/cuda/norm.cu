// norm(x) as a reduction phase (norm.h): per-block partial sums of squares
// on a fixed grid, added in block order by one block, then the root.
#include <cuda_runtime.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/vec.cuh"

namespace coconet::kernels::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    squares_kernel(const T* x, std::int64_t n, double* partials) {
  float sum = 0.0f;
  for_each_scalar(n, [&](std::int64_t i) {
    const float v = to_f32(x[i]);
    sum += v * v;
  });
  const double b = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = b;
}

__global__ void __launch_bounds__(kBlockThreads)
    finish_sum_kernel(const double* partials, int blocks, double* sum) {
  double x = 0.0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) x += partials[b];
  x = block_sum(x);
  if (threadIdx.x == 0) *sum = x;
}

template <typename T>
__global__ void sqrt_kernel(const double* sum, T* out) {
  *out = from_f32<T>(static_cast<float>(sqrt(*sum)));
}

}  // namespace

void sum_of_squares(const DeviceView& in, double* workspace, cudaStream_t stream) {
  with_storage(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int blocks = blocks_for(in.size, kBlockThreads, kReductionBlocks);
    squares_kernel<<<blocks, kBlockThreads, 0, stream>>>(static_cast<const T*>(in.data), in.size,
                                                         workspace + 1);
    COCONET_CUDA_CHECK_LAUNCH();
    finish_sum_kernel<<<1, kBlockThreads, 0, stream>>>(workspace + 1, blocks, workspace);
    COCONET_CUDA_CHECK_LAUNCH();
  });
}

void sqrt_into(const double* sum, const DeviceView& out, cudaStream_t stream) {
  require_size(out, 1, "norm output");
  with_storage(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    sqrt_kernel<<<1, 1, 0, stream>>>(sum, static_cast<T*>(out.data));
    COCONET_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace coconet::kernels::cuda
