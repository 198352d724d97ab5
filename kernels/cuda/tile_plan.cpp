// The tiled GEMM's tile order and flags, and the communication kernel's
// reductions (see tile_plan.h).
#include "kernels/cuda/tile_plan.h"

#include <limits>
#include <string>

#include "model/error.h"

namespace coconet::kernels::cuda {
namespace {

constexpr const char* kWhere = "overlap: tile on the cuda backend";

void require(bool ok, const std::string& what) {
  if (!ok) throw UserError(std::string(kWhere) + ": " + what);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The most rows one run may have: TileSegment::rows is 32-bit.
constexpr std::int64_t kMaxRunRows = std::numeric_limits<std::int32_t>::max();

}  // namespace

TileGemmPlan plan_tile_gemm(std::span<const std::vector<TileRows>> blocks, std::int64_t n) {
  require(n > 0, "the GEMM has no columns");
  require(static_cast<int>(blocks.size()) <= kMaxTileBlocks,
          std::to_string(blocks.size()) + " blocks exceed the limit of " +
              std::to_string(kMaxTileBlocks) + "; choose fewer chunks");
  TileGemmPlan p;
  p.col_tiles = static_cast<std::int32_t>(ceil_div(n, kTileCols));
  std::int64_t ticket = 0;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    std::int64_t tiles = 0;
    for (const TileRows& r : blocks[b]) {
      require(r.rows >= 0 && r.a_offset >= 0 && r.c_offset >= 0,
              "a run of rows with a negative size or offset");
      require(r.rows <= kMaxRunRows, std::to_string(r.rows) +
                                         " rows in one run exceed the GEMM's 32-bit row count (" +
                                         std::to_string(kMaxRunRows) + "); choose more chunks");
      if (r.rows == 0) continue;
      TileSegment s;
      s.a_offset = r.a_offset;
      s.c_offset = r.c_offset;
      s.rows = static_cast<std::int32_t>(r.rows);
      s.block = static_cast<std::int32_t>(b);
      s.first_tile = static_cast<std::int32_t>(ticket);
      s.row_tiles = static_cast<std::int32_t>(ceil_div(r.rows, kTileRows));
      const std::int64_t own = std::int64_t{s.row_tiles} * p.col_tiles;
      tiles += own;
      ticket += own;
      p.segments.push_back(s);
    }
    p.block_tiles.push_back(static_cast<std::int32_t>(tiles));
  }
  require(static_cast<int>(p.segments.size()) <= kMaxTileSegments,
          std::to_string(p.segments.size()) + " runs of rows exceed the limit of " +
              std::to_string(kMaxTileSegments) + "; choose fewer chunks");
  require(ticket < (std::int64_t{1} << 31), "more tiles than a 32-bit ticket counts");
  p.total_tiles = static_cast<std::int32_t>(ticket);
  return p;
}

std::vector<int> peer_order(int ranks, int rank) {
  std::vector<int> out;
  for (int j = 0; j < ranks; ++j) out.push_back((rank + 1 + j) % ranks);
  return out;
}

TileCommPlan plan_tile_comm(TileCollectiveKind kind, std::span<const TileBlockViews> blocks,
                            int ranks, int rank) {
  require(ranks >= 1 && rank >= 0 && rank < ranks,
          "rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  require(ranks <= kMaxTilePeers, std::to_string(ranks) + " ranks exceed the " +
                                      std::to_string(kMaxTilePeers) +
                                      " of one NVLink domain the communication kernel reads");
  require(static_cast<int>(blocks.size()) <= kMaxTileBlocks, std::to_string(blocks.size()) +
                                                                 " blocks exceed the limit of " +
                                                                 std::to_string(kMaxTileBlocks));
  TileCommPlan p;
  p.blocks = static_cast<int>(blocks.size());
  p.peers = peer_order(ranks, rank);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const TileBlockViews& v = blocks[b];
    const auto block = static_cast<std::int32_t>(b);
    if (kind == TileCollectiveKind::reduce_scatter) {
      require(static_cast<int>(v.parts.size()) == ranks && v.outs.size() == 1,
              "a reduce-scatter block needs one part per rank and one output");
      const Span1d mine = v.parts[static_cast<std::size_t>(rank)];
      if (mine.size > 0) p.steps.push_back({mine.begin, mine.size, v.outs.front(), block, 0});
      continue;
    }
    require(v.parts.size() == v.outs.size(), "an allreduce block needs one output per run");
    for (std::size_t k = 0; k < v.parts.size(); ++k) {
      const Span1d run = v.parts[k];
      const Span1d shard = shard_of(run.size, ranks, rank);
      if (shard.size > 0)
        p.steps.push_back({run.begin + shard.begin, shard.size, run.begin + shard.begin, block, 0});
      if (run.size > 0) p.copies.push_back({run.begin, v.outs[k], run.size});
    }
  }
  require(static_cast<int>(p.steps.size()) <= kMaxTileSteps &&
              static_cast<int>(p.copies.size()) <= kMaxTileSteps,
          "more reductions than the communication kernel takes (" + std::to_string(kMaxTileSteps) +
              "); choose fewer chunks");
  return p;
}

}  // namespace coconet::kernels::cuda
