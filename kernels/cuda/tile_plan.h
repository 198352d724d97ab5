// Host-side plan of the cuda backend's overlap: tile (tile_gemm.h): which
// output tiles the one GEMM computes in which order, which block (flag) each
// tile completes and how many tiles complete a block, and what the
// communication kernel reduces after each block: which part of the result,
// read from which peers in which order, written where. Plain C++ (no CUDA,
// no NCCL), so the plan is tested on any machine; tile_at is also the
// kernel's own lookup of a tile (COCONET_HD).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cuda/grid.h"
#include "model/host_device.h"
#include "model/program.h"

namespace coconet::kernels::cuda {

// A CTA's output tile: kTileRows x kTileCols, the K dimension in steps of
// kTileDepth; kTileGemmThreads = 4 warps, each a 32 x 32 quarter of the tile
// (2 x 2 WMMA fragments of 16 x 16 x 16 for f16/bf16; a 4 x 8 register
// block per thread for f32).
inline constexpr int kTileRows = 64;
inline constexpr int kTileCols = 64;
inline constexpr int kTileDepth = 32;
inline constexpr int kTileGemmThreads = 128;
// Limits of one launch, both kernels taking their tables in their parameters
// (__grid_constant__, up to 32 KB of parameters since CUDA 12.1 on sm_70+):
// segments of rows (one per rank slice per block: 8 ranks x 32 chunks),
// blocks (flags), reduction steps and copies.
inline constexpr int kMaxTileSegments = 256;
inline constexpr int kMaxTileBlocks = 64;
inline constexpr int kMaxTileSteps = 256;
// Peers of one LSA team the communication kernel reads: 72, the GPUs of the
// largest NVLink domain sold (GB200 NVL72).
inline constexpr int kMaxTilePeers = 72;
// CTAs of the communication kernel, each spinning on the flags and taking
// part in the per-block LSA barriers (one barrier index each, under
// kFusedCtas): 16, NCCL's channel count for a ring on one NVLink node, so
// that at least 116 of an H100's 132 SMs are left to the GEMM (the GEMM
// never waits on the communication kernel, so no resident CTA can starve it).
inline constexpr int kTileCommCtas = 16;

// The GEMM's grid: one CTA per tile at most, and no more CTAs than
// `per_sm` (resident GEMM CTAs per SM) on the SMs left after kTileCommCtas
// SMs' worth of room for the communication kernel (at least one SM). The
// GEMM is persistent (its CTAs leave only when the tickets run out), so a
// grid that fills every SM keeps the communication kernel's CTAs off the
// GPU until the GEMM ends whenever the GEMM is dispatched first, and the
// GEMM is launched first (tile_gemm.h) so that serialised kernels
// (CUDA_LAUNCH_BLOCKING=1) cannot leave the communication kernel waiting for
// a GEMM queued behind it.
[[nodiscard]] constexpr int tile_gemm_grid(std::int32_t total_tiles, std::int64_t per_sm,
                                           std::int64_t sms) {
  const std::int64_t left = sms > kTileCommCtas ? sms - kTileCommCtas : 1;
  const std::int64_t cap = (per_sm > 1 ? per_sm : 1) * left;
  const std::int64_t want = total_tiles > 1 ? total_tiles : 1;
  return static_cast<int>(want < cap ? want : cap);
}

// One run of output rows of one block, as the executor cuts them (one
// exec::MatmulArgs): element offsets of its first row in A and in C.
struct TileRows {
  std::int64_t a_offset = 0;
  std::int64_t c_offset = 0;
  std::int64_t rows = 0;
};

// A run of rows in the GEMM's tile order: its tiles are tickets
// [first_tile, first_tile + row_tiles * col_tiles), row-major.
struct TileSegment {
  std::int64_t a_offset = 0;
  std::int64_t c_offset = 0;
  std::int32_t rows = 0;
  std::int32_t block = 0;  // the flag its tiles raise
  std::int32_t first_tile = 0;
  std::int32_t row_tiles = 0;
};

struct TileGemmPlan {
  std::vector<TileSegment>
      segments;  // in compute order: block 0's runs first, each block's as given
  std::vector<std::int32_t>
      block_tiles;             // tiles of block b: flag b's value once the block is written
  std::int32_t col_tiles = 0;  // tiles across n
  std::int32_t total_tiles = 0;
};

// Segments and flag targets for `blocks` (each the runs of rows of one block,
// in the order they are to be computed) over n output columns. Empty runs are
// dropped; a block with no rows has target 0 (complete at once). Throws
// UserError past the limits above or for a negative size.
[[nodiscard]] TileGemmPlan plan_tile_gemm(std::span<const std::vector<TileRows>> blocks,
                                          std::int64_t n);

// Where ticket `ticket` lies: the segment, the tile's first row inside it and
// its first column. The segments are in ticket order (plan_tile_gemm).
struct TileCoord {
  int segment = -1;
  std::int64_t row = 0;
  std::int64_t col = 0;
};
COCONET_HD TileCoord tile_at(const TileSegment* segments, int count, int col_tiles,
                             std::int32_t ticket) {
  TileCoord c;
  for (int s = 0; s < count && segments[s].first_tile <= ticket; ++s) c.segment = s;
  if (c.segment < 0) return c;
  const std::int32_t local = ticket - segments[c.segment].first_tile;
  c.row = static_cast<std::int64_t>(local / col_tiles) * kTileRows;
  c.col = static_cast<std::int64_t>(local % col_tiles) * kTileCols;
  return c;
}

// The collective a tile unit's communication kernel runs.
enum class TileCollectiveKind : std::uint8_t { reduce_scatter, allreduce };

// One block's collective, in elements of the matmul's result (the window the
// GEMM writes, laid out as the result's buffer on every rank) and of the
// collective's output buffer.
struct TileBlockViews {
  // reduce-scatter: the block's part of each position's slice, in position
  // order (one per rank); allreduce: the block's runs of rows.
  std::vector<Span1d> parts;
  // reduce-scatter: one, where this rank's reduced part goes in its output;
  // allreduce: one per part.
  std::vector<std::int64_t> outs;
};

// One reduction of the communication kernel, after flag `block`: elements
// [src, src + count) of the window, summed over every peer's window (read in
// TileCommPlan::peers order) into dst: the output buffer (reduce-scatter) or,
// allreduce, the same place of every peer's window (in place).
struct TileStep {
  std::int64_t src = 0;
  std::int64_t count = 0;
  std::int64_t dst = 0;
  std::int32_t block = 0;
  std::int32_t unused = 0;
};

// After the kernel (allreduce): window elements [src, src + count) to the output buffer at dst.
struct TileCopy {
  std::int64_t src = 0;
  std::int64_t dst = 0;
  std::int64_t count = 0;
};

struct TileCommPlan {
  std::vector<TileStep> steps;   // by block, in block order
  std::vector<TileCopy> copies;  // allreduce only
  std::vector<int>
      peers;  // the order peers' windows are read: rank + 1, rank + 2, ..., this rank last
  int blocks = 0;
};

// This rank's reductions: reduce-scatter: its own part of each block; allreduce:
// its shard (grid.h shard_of, the slice rule) of each run of each block, and
// every run copied out after. Throws UserError on parts that do not match
// the kind (a reduce-scatter needs one part per rank and one output), for
// ranks outside [0, ranks) or past the limits.
[[nodiscard]] TileCommPlan plan_tile_comm(TileCollectiveKind kind,
                                          std::span<const TileBlockViews> blocks, int ranks,
                                          int rank);

// The order in which rank `rank` of `ranks` reads its peers: (rank + 1 + j) % ranks,
// its own window last, as a ring adds its own part in its last step.
[[nodiscard]] std::vector<int> peer_order(int ranks, int rank);

}  // namespace coconet::kernels::cuda
