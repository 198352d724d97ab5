// Block-wide sums in double for the reduction phases (LAMB's norms). Private
// to the .cu files of kernels/cuda. The order of additions depends only on the
// block size, so a sum is the same run after run.
#pragma once

#include <cuda_runtime.h>

namespace coconet::kernels::cuda {

inline constexpr int kWarpThreads = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
  for (int offset = kWarpThreads / 2; offset > 0; offset /= 2)
    x += __shfl_down_sync(kFullWarpMask, x, offset);
  return x;
}

// Sum over the block; the result is valid in thread 0. Every thread must call.
__device__ __forceinline__ double block_sum(double x) {
  __shared__ double warp_partials[kWarpThreads];
  const int lane = threadIdx.x % kWarpThreads;
  const int warp = threadIdx.x / kWarpThreads;
  x = warp_sum(x);
  if (lane == 0) warp_partials[warp] = x;
  __syncthreads();
  const int warps = (blockDim.x + kWarpThreads - 1) / kWarpThreads;
  x = threadIdx.x < warps ? warp_partials[threadIdx.x] : 0.0;
  if (warp == 0) x = warp_sum(x);
  __syncthreads();  // warp_partials may be reused by the next call
  return x;
}

}  // namespace coconet::kernels::cuda
