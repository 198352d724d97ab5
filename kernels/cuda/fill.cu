// Input generation kernel (see fill.h): grid-stride, one element per thread
// per step; the hash is a handful of integer multiplies, so the kernel runs
// at the speed of its stores.
#include <cuda_runtime.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/grid.h"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/vec.cuh"

namespace coconet::kernels::cuda {
namespace {

template <typename T>
__global__ void fill_input_kernel(T* dst, std::int64_t n, model::InputPattern pattern) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = from_f32<T>(static_cast<float>(model::input_at(pattern, i)));  // small integers times a power of two: exact
}

template <typename T>
void launch(const DeviceView& dst, const model::InputPattern& pattern, cudaStream_t stream) {
  const int blocks = grid_for_kernel(fill_input_kernel<T>, dst.size);
  fill_input_kernel<T><<<blocks, kBlockThreads, 0, stream>>>(static_cast<T*>(dst.data), dst.size, pattern);
  COCONET_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void fill_input(const DeviceView& dst, const model::InputPattern& pattern, cudaStream_t stream) {
  if (dst.size == 0) return;
  switch (dst.dtype) {
    case model::DType::f16:
      return launch<__half>(dst, pattern, stream);
    case model::DType::bf16:
      return launch<__nv_bfloat16>(dst, pattern, stream);
    case model::DType::f32:
      return launch<float>(dst, pattern, stream);
  }
}

}  // namespace coconet::kernels::cuda
