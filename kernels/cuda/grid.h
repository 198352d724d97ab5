// Grid geometry (threads per block, blocks per grid) shared by coconet's CUDA kernels, and the rank-slice rule on
// the device. Host-only code (tests, the backend) uses these too, so the
// header needs no CUDA: it compiles with any C++20 compiler.
//
// Design notes
// - Every bandwidth-bound kernel moves 8 elements per thread per step: one
//   16-byte load of f16/bf16 or two of f32 (the vector width of an LDG.128).
//   The vector path needs every pointer 16-byte aligned; misaligned views
//   (ragged slices) take the scalar path of the same kernel instead.
// - Grids are capped and kernels loop grid-stride, so any size launches. The
//   cap of a launch is what the device holds resident of that kernel
//   (kernels/cuda/occupancy.h, cudaOccupancyMaxActiveBlocksPerMultiprocessor);
//   kMaxGridBlocks is only the default of blocks_for.
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/host_device.h"

namespace coconet::kernels::cuda {

// Threads per block: 8 warps, enough to hide latency at full occupancy
// (2048 threads per SM on sm_90 = 8 such blocks).
inline constexpr int kBlockThreads = 256;
// Bytes one vector load moves (LDG.128).
inline constexpr int kVecBytes = 16;
// Elements a thread handles per step (16 bytes of a 2-byte type).
inline constexpr int kVecElems = 8;
// Grid cap: 4 waves of 132 SMs x 8 resident blocks (H100/H200 SXM), rounded up;
// larger sizes loop grid-stride.
inline constexpr std::int64_t kMaxGridBlocks = 4096;
// Grid-stride launches ask for this many waves of resident blocks: one, so
// every block is resident from the start and loops over its share (no tail
// wave). To be confirmed against 2 and 4 on the GPU (bench_gpu).
inline constexpr int kGridWaves = 1;
// Reduction kernels use a fixed grid so that their partial sums, added in a
// fixed order, give the same result run after run.
inline constexpr int kReductionBlocks = 1024;

// Blocks for `items` work items of `threads` each, at least 1, at most `cap`.
[[nodiscard]] constexpr int blocks_for(std::int64_t items, int threads,
                                       std::int64_t cap = kMaxGridBlocks) {
  const std::int64_t need = (items + threads - 1) / threads;
  return static_cast<int>(std::clamp<std::int64_t>(need, 1, cap));
}

// The grid cap of a grid-stride kernel: `blocks_per_sm` resident blocks on
// each of `sms` SMs (each at least 1), times kGridWaves.
[[nodiscard]] constexpr std::int64_t occupancy_cap(std::int64_t blocks_per_sm, std::int64_t sms) {
  return std::max<std::int64_t>(blocks_per_sm, 1) * std::max<std::int64_t>(sms, 1) * kGridWaves;
}

// Rank r's part [begin, begin+size) of n elements over p ranks: the first n % p
// ranks hold one element more (the rule of model::slice_extent).
struct Span1d {
  std::int64_t begin = 0;
  std::int64_t size = 0;
};
COCONET_HD Span1d shard_of(std::int64_t n, int p, int r) {
  const std::int64_t base = n / p;
  const std::int64_t extra = n % p;
  const std::int64_t begin = r * base + (r < extra ? r : extra);
  return {begin, base + (r < extra ? 1 : 0)};
}

// True when an address suits the 16-byte vector path.
[[nodiscard]] inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kVecBytes == 0;
}

}  // namespace coconet::kernels::cuda
