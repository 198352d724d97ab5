// Grid sizes from the occupancy calculator: a grid-stride kernel is launched
// with as many blocks as the device can hold resident at once (blocks per SM
// that cudaOccupancyMaxActiveBlocksPerMultiprocessor reports for the kernel's
// registers and shared memory, times the SM count), never more than its work
// needs. A fixed cap (8 blocks per SM) over-asks for kernels whose register
// use keeps fewer blocks resident, such as the optimizer kernels.
#pragma once

#include <cstdint>

#include "kernels/cuda/grid.h"

namespace coconet::kernels::cuda {

// The grid cap of `kernel` at `threads` per block on the current device:
// occupancy_cap(resident blocks per SM, SMs); cached per kernel, block size
// and device.
[[nodiscard]] std::int64_t grid_cap(const void* kernel, int threads);

// Blocks for `items` work items of `threads` each, at most grid_cap.
template <typename... Args>
[[nodiscard]] int grid_for_kernel(void (*kernel)(Args...), std::int64_t items, int threads = kBlockThreads) {
  return blocks_for(items, threads, grid_cap(reinterpret_cast<const void*>(kernel), threads));
}

}  // namespace coconet::kernels::cuda
