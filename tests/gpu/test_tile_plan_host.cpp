// The host side of the cuda backend's overlap: tile (kernels/cuda/tile_plan.h):
// the tiled GEMM's tickets cover every output element once, block by block,
// each block's flag target is its tile count; the communication kernel's
// reductions cover each rank's part once, peers read in ring order with the
// own window last; and the executor hands the backend, for megatron_mlp's
// tile schedules on 2 and 3 ranks, blocks whose rows come in ring order (own
// slice last) and whose collective, planned, reduces every rank's slice of
// the result exactly once. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../unit/dry_backend.h"
#include "exec/executor.h"
#include "kernels/cuda/tile_gemm.h"
#include "kernels/cuda/tile_plan.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "model/program.h"
#include "plan/step_plan.h"

namespace coconet {
namespace {

namespace kc = kernels::cuda;

// Every (row, col) of the C rows the segments name, by the tiles of every
// ticket: how often each element is written, and the ticket order of blocks.
struct Coverage {
  std::map<std::pair<std::int64_t, std::int64_t>, int> writes;  // (C row offset / ldc, col)
  std::vector<int> tiles_per_block;
  bool blocks_in_order = true;
};

Coverage cover(const kc::TileGemmPlan& p, std::int64_t n, std::int64_t ldc) {
  Coverage c;
  c.tiles_per_block.assign(p.block_tiles.size(), 0);
  int last_block = 0;
  for (std::int32_t t = 0; t < p.total_tiles; ++t) {
    const kc::TileCoord at =
        kc::tile_at(p.segments.data(), static_cast<int>(p.segments.size()), p.col_tiles, t);
    EXPECT_GE(at.segment, 0) << "ticket " << t;
    if (at.segment < 0) continue;
    const kc::TileSegment& s = p.segments[static_cast<std::size_t>(at.segment)];
    c.blocks_in_order = c.blocks_in_order && s.block >= last_block;
    last_block = s.block;
    ++c.tiles_per_block[static_cast<std::size_t>(s.block)];
    for (std::int64_t r = at.row; r < std::min<std::int64_t>(at.row + kc::kTileRows, s.rows); ++r)
      for (std::int64_t col = at.col; col < std::min<std::int64_t>(at.col + kc::kTileCols, n);
           ++col)
        ++c.writes[{s.c_offset / ldc + r, col}];
  }
  return c;
}

// Shown to fail: with row_tiles rounded down (rows / kTileRows) the ragged
// runs' last rows were never written; with tile_at's row and column indices
// swapped, elements were missed.
TEST(TilePlan, EveryOutputElementIsWrittenOnceBlockByBlock) {
  const std::int64_t n = 130;  // 3 column tiles, the last of 2 columns
  const std::int64_t ldc = n;
  // Two blocks of 2 runs each (a 2-rank ring: the next rank's slice first), ragged rows.
  const std::vector<std::vector<kc::TileRows>> blocks{
      {{70 * 512, 70 * ldc, 33}, {0, 0, 65}},
      {{103 * 512, 103 * ldc, 1}, {65 * 512, 65 * ldc, 5}},
  };
  const kc::TileGemmPlan p = kc::plan_tile_gemm(blocks, n);
  EXPECT_EQ(p.col_tiles, 3);
  ASSERT_EQ(p.block_tiles.size(), 2u);
  EXPECT_EQ(p.block_tiles[0], (1 + 2) * 3);  // 33 rows: 1 row tile; 65 rows: 2
  EXPECT_EQ(p.block_tiles[1], (1 + 1) * 3);
  EXPECT_EQ(p.total_tiles, p.block_tiles[0] + p.block_tiles[1]);
  const Coverage c = cover(p, n, ldc);
  EXPECT_TRUE(c.blocks_in_order);
  EXPECT_EQ(c.tiles_per_block, (std::vector<int>{p.block_tiles[0], p.block_tiles[1]}));
  std::set<std::int64_t> rows;
  for (const auto& b : blocks)
    for (const auto& r : b)
      for (std::int64_t i = 0; i < r.rows; ++i) rows.insert(r.c_offset / ldc + i);
  EXPECT_EQ(c.writes.size(), rows.size() * static_cast<std::size_t>(n));
  for (const auto& [at, count] : c.writes) {
    EXPECT_EQ(count, 1) << "row " << at.first << " col " << at.second;
    EXPECT_TRUE(rows.count(at.first)) << "row " << at.first << " is no block's";
  }
  // The first run of block 0 is computed first: ticket 0 is its first tile.
  EXPECT_EQ(
      kc::tile_at(p.segments.data(), static_cast<int>(p.segments.size()), p.col_tiles, 0).segment,
      0);
  EXPECT_EQ(p.segments.front().c_offset, 70 * ldc);
}

// Shown to fail: without the limit on blocks, 65 blocks were planned (past
// the kernels' flags).
TEST(TilePlan, AnEmptyBlockCompletesAtOnceAndTheLimitsAreNamed) {
  const std::vector<std::vector<kc::TileRows>> blocks{{{0, 0, 64}}, {{0, 0, 0}}, {}};
  const kc::TileGemmPlan p = kc::plan_tile_gemm(blocks, 64);
  EXPECT_EQ(p.block_tiles, (std::vector<std::int32_t>{1, 0, 0}));
  EXPECT_EQ(p.segments.size(), 1u);
  const std::vector<std::vector<kc::TileRows>> many(kc::kMaxTileBlocks + 1, {{0, 0, 1}});
  try {
    (void)kc::plan_tile_gemm(many, 64);
    ADD_FAILURE() << "more blocks than flags";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("choose fewer chunks"), std::string::npos) << e.what();
  }
  const std::vector<std::vector<kc::TileRows>> runs{
      std::vector<kc::TileRows>(kc::kMaxTileSegments + 1, {0, 0, 1})};
  EXPECT_THROW((void)kc::plan_tile_gemm(runs, 64), UserError);
  EXPECT_THROW((void)kc::plan_tile_gemm(blocks, 0), UserError);
  // Shown to fail: without the limit on a run's rows, 2^31 rows in one
  // column tile (2^25 tickets, within the ticket check) became a segment of
  // -2^31 rows (TileSegment::rows is 32-bit), and the kernel wrote none.
  const std::vector<std::vector<kc::TileRows>> tall{{{0, 0, std::int64_t{1} << 31}}};
  EXPECT_THROW((void)kc::plan_tile_gemm(tall, 1), UserError);
  const std::vector<std::vector<kc::TileRows>> tallest_allowed{
      {{0, 0, std::numeric_limits<std::int32_t>::max()}}};
  EXPECT_EQ(kc::plan_tile_gemm(tallest_allowed, 1).segments.front().rows,
            std::numeric_limits<std::int32_t>::max());
}

// The GEMM's argument checks run on the host before anything is queued (the
// communication kernel would wait for a GEMM that never runs). Shown to
// fail: without the stride check, lda < k passed.
TEST(TilePlan, TheGemmRefusesBadArgumentsBeforeItLaunches) {
  const std::vector<std::vector<kc::TileRows>> blocks{{{0, 0, 64}}};
  const kc::TileGemmPlan p = kc::plan_tile_gemm(blocks, 64);
  int a = 0, b = 0, c = 0;
  const kc::TileGemmArgs good{&a, &b, &c, nullptr, model::DType::f16, model::DType::f16, 64,
                              32, 32, 64, 64};
  EXPECT_NO_THROW(kc::validate_tile_gemm(good, p));
  kc::TileGemmArgs short_rows = good;
  short_rows.lda = 31;
  EXPECT_THROW(kc::validate_tile_gemm(short_rows, p), UserError);
  kc::TileGemmArgs narrow_c = good;
  narrow_c.ldc = 63;
  EXPECT_THROW(kc::validate_tile_gemm(narrow_c, p), UserError);
  kc::TileGemmArgs no_a = good;
  no_a.a = nullptr;
  EXPECT_THROW(kc::validate_tile_gemm(no_a, p), UserError);
}

// The persistent GEMM leaves kTileCommCtas SMs' worth of room for the
// communication kernel, launched after it. Shown to fail: with the grid at
// every SM's resident CTAs (the occupancy cap), an H100's 132 SMs x 6 CTAs
// gave 792, no room left.
TEST(TilePlan, TheGemmGridLeavesRoomForTheCommunicationKernel) {
  const int h100_sms = 132, per_sm = 6;  // ptxas: 80 registers x 128 threads -> 6 CTAs per SM
  EXPECT_EQ(kc::tile_gemm_grid(1 << 20, per_sm, h100_sms), per_sm * (h100_sms - kc::kTileCommCtas));
  EXPECT_EQ(kc::tile_gemm_grid(10, per_sm, h100_sms), 10);  // no more CTAs than tiles
  EXPECT_EQ(kc::tile_gemm_grid(0, per_sm, h100_sms), 1);
  // A GPU of no more SMs than the communication kernel's CTAs: one SM's worth.
  EXPECT_EQ(kc::tile_gemm_grid(1 << 20, per_sm, kc::kTileCommCtas), per_sm);
  EXPECT_EQ(kc::tile_gemm_grid(1 << 20, 0, h100_sms), h100_sms - kc::kTileCommCtas);
}

// Shown to fail: with peer_order starting at the rank itself, the own window
// was read first.
TEST(TileComm, PeersAreReadInRingOrderOwnWindowLast) {
  EXPECT_EQ(kc::peer_order(4, 1), (std::vector<int>{2, 3, 0, 1}));
  EXPECT_EQ(kc::peer_order(1, 0), (std::vector<int>{0}));
  for (int p = 1; p <= 8; ++p)
    for (int r = 0; r < p; ++r) {
      const auto order = kc::peer_order(p, r);
      EXPECT_EQ(order.back(), r);
      EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), static_cast<std::size_t>(p));
    }
}

// Reduce-scatter: rank r reduces part r of each block into its output; the
// parts of other ranks are theirs. Allreduce: the ranks' shards of each run
// tile it exactly; every run is copied out whole. Shown to fail: with the
// allreduce's shard taken at the rank's position 0 (shard_of(n, p, 0)), the
// shards overlapped and left the tail unreduced.
TEST(TileComm, EachRankReducesItsPartOfEveryBlockOnce) {
  std::vector<kc::TileBlockViews> rs{{{{0, 10}, {10, 7}, {17, 7}}, {100}},
                                     {{{24, 3}, {27, 0}, {27, 3}}, {110}}};
  for (int r = 0; r < 3; ++r) {
    const kc::TileCommPlan p = kc::plan_tile_comm(kc::TileCollectiveKind::reduce_scatter, rs, 3, r);
    EXPECT_EQ(p.blocks, 2);
    EXPECT_TRUE(p.copies.empty());
    for (const kc::TileStep& s : p.steps) {
      const kc::Span1d part =
          rs[static_cast<std::size_t>(s.block)].parts[static_cast<std::size_t>(r)];
      EXPECT_EQ(s.src, part.begin);
      EXPECT_EQ(s.count, part.size);
      EXPECT_EQ(s.dst, rs[static_cast<std::size_t>(s.block)].outs.front());
    }
    EXPECT_EQ(p.steps.size(), r == 1 ? 1u : 2u);  // rank 1's part of block 1 is empty
  }
  const std::vector<kc::TileBlockViews> ar{{{{0, 11}, {40, 5}}, {200, 240}}, {{{11, 2}}, {211}}};
  std::map<std::int64_t, int> reduced;
  for (int r = 0; r < 4; ++r) {
    const kc::TileCommPlan p = kc::plan_tile_comm(kc::TileCollectiveKind::allreduce, ar, 4, r);
    for (const kc::TileStep& s : p.steps) {
      EXPECT_EQ(s.dst, s.src);  // in place in every window
      for (std::int64_t i = 0; i < s.count; ++i) ++reduced[s.src + i];
    }
    ASSERT_EQ(p.copies.size(), 3u);
    EXPECT_EQ(p.copies[1].src, 40);
    EXPECT_EQ(p.copies[1].dst, 240);
    EXPECT_EQ(p.copies[1].count, 5);
  }
  EXPECT_EQ(reduced.size(), 11u + 5u + 2u);
  for (const auto& [i, count] : reduced) EXPECT_EQ(count, 1) << "element " << i;
  EXPECT_THROW((void)kc::plan_tile_comm(kc::TileCollectiveKind::reduce_scatter, rs, 2, 0),
               UserError);
  EXPECT_THROW((void)kc::plan_tile_comm(kc::TileCollectiveKind::allreduce, ar, 4, 4), UserError);
}

// The executor's own calls: megatron_mlp's ol(MM,RS)-C-AG and ol(MM,AR)-C
// with overlap: tile, 4 chunks, on 2 and 3 ranks with the cuda capabilities
// (one collective resident across the blocks): one tiled_matmul_collective
// per step, whose blocks run the next rank's slice first and the own slice
// last, and whose planned reductions cover every rank's slice of the result
// exactly once (reduce-scatter) or all of it exactly once (allreduce).
// Shown to fail: without the executor's rotation the own slice came first.
TEST(TileExecutor, TheBlocksComeInRingOrderAndTheReductionsCoverTheResult) {
  const model::Program p = model::load_program(model::resolve_workload("megatron_mlp"));
  const model::Bindings sizes =
      p.bind({{"B", 2}, {"S", 7}, {"H", 8}});  // 14 rows: ragged over 3 ranks
  int checked = 0;
  for (const char* name : {"ol(MM,RS)-C-AG", "ol(MM,AR)-C"}) {
    model::Schedule s;
    for (const auto& t : model::enumerate_schedules(p))
      if (t.name() == name) s = t;
    ASSERT_EQ(s.name(), name);
    s.knobs.chunks = 4;
    s.knobs.overlap = model::Grain::tile;
    for (int ranks : {2, 3}) {
      const plan::StepPlan plan = plan::lower(s, sizes, ranks, plan::cuda_capabilities());
      std::map<std::int64_t, int> reduced;  // element of the result -> reductions, over every rank
      std::int64_t result_size = 0;
      for (int r = 0; r < ranks; ++r) {
        exec::testing::DryBackend dry(r, ranks, plan.caps);
        dry.set_groups(1);
        exec::Executor ex(dry, plan);
        (void)ex.run_step();
        ASSERT_EQ(dry.tile_calls().size(), 1u) << name;
        const auto& call = dry.tile_calls().front();
        ASSERT_EQ(call.blocks.size(), 4u);
        const std::int64_t ldc = call.blocks.front().front().ldc;
        const std::int64_t rows = sizes.at("B") * sizes.at("S");
        result_size = rows * ldc;
        std::vector<std::vector<kc::TileRows>> runs;
        std::vector<kc::TileBlockViews> views;
        for (std::size_t b = 0; b < call.blocks.size(); ++b) {
          runs.emplace_back();
          for (const auto& a : call.blocks[b])
            runs.back().push_back({a.a.offset, a.out.offset, a.m});
          if (call.collective.op == model::OpKind::reducescatter) {
            // The own slice's run is the block's last, the next rank's its first.
            const auto slice = [&](std::int64_t offset) {
              for (int q = 0; q < ranks; ++q) {
                const auto& part = call.collective.blocks[b].parts[static_cast<std::size_t>(q)];
                if (part.count > 0 && offset >= part.offset && offset < part.offset + part.count)
                  return q;
              }
              return -1;
            };
            EXPECT_EQ(slice(call.blocks[b].back().out.offset), r)
                << name << " P=" << ranks << " block " << b;
            EXPECT_EQ(slice(call.blocks[b].front().out.offset), (r + 1) % ranks)
                << name << " block " << b;
          }
          kc::TileBlockViews v;
          for (const auto& part : call.collective.blocks[b].parts)
            v.parts.push_back({part.offset, part.count});
          for (const auto& out : call.collective.blocks[b].outs) v.outs.push_back(out.offset);
          views.push_back(v);
        }
        const kc::TileGemmPlan gemm = kc::plan_tile_gemm(runs, call.blocks.front().front().n);
        EXPECT_EQ(cover(gemm, call.blocks.front().front().n, ldc).writes.size(),
                  static_cast<std::size_t>(result_size));
        const auto kind = call.collective.op == model::OpKind::reducescatter
                              ? kc::TileCollectiveKind::reduce_scatter
                              : kc::TileCollectiveKind::allreduce;
        const kc::TileCommPlan comm = kc::plan_tile_comm(kind, views, ranks, r);
        for (const kc::TileStep& st : comm.steps)
          for (std::int64_t i = 0; i < st.count; ++i) ++reduced[st.src + i];
        ++checked;
      }
      EXPECT_EQ(reduced.size(), static_cast<std::size_t>(result_size)) << name << " P=" << ranks;
      for (const auto& [i, count] : reduced)
        EXPECT_EQ(count, 1) << name << " P=" << ranks << " element " << i;
    }
  }
  EXPECT_EQ(checked, 2 * (2 + 3));
}

}  // namespace
}  // namespace coconet
