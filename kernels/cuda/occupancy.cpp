// Grid caps per kernel from the CUDA occupancy calculator (see occupancy.h).
#include "kernels/cuda/occupancy.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <tuple>

#include "kernels/cuda/check.h"

namespace coconet::kernels::cuda {

std::int64_t grid_cap(const void* kernel, int threads) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int>, std::int64_t> cache;
  int device = 0;
  COCONET_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(kernel, threads, device);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  int per_sm = 0, sms = 0;
  COCONET_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  COCONET_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t blocks = occupancy_cap(per_sm, sms);
  cache.emplace(key, blocks);
  return blocks;
}

}  // namespace coconet::kernels::cuda
