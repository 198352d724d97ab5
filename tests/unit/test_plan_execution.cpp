// The plan the executor runs is the plan the simulator prices. For every
// workload x schedule x P in {1, 2, 3, 4, 8}, at ragged and even sizes, on
// the capabilities of both backends, each rank of the job runs one step on a
// dry backend (tests/unit/dry_backend.h) and the test holds what it issued
// (Executor::ran()) against plan::lower's StepPlan:
//   1. the launches: the plan's issue order, less the ops the rank takes no part in;
//   2. the views: each op's calls, summed over its chunks, cover the rank's
//      part of the op's value (plan::rank_views), ragged slices included;
//   3. the simulator's tasks for the rank's group are those same launches;
//   4. rank 0's collective calls move the bytes the cost model prices, and
//      position 0 of every group makes as many backend calls per launch as
//      the plan counts (Op::calls, what the cost model charges overheads for).
#include <gtest/gtest.h>

#include <fmt/core.h>

#include <map>
#include <string>
#include <vector>

#include "dry_backend.h"
#include "exec/alltoall_blocks.h"
#include "exec/executor.h"
#include "model/builder.h"
#include "model/enumerate.h"
#include "plan/views.h"
#include "sim/resolve.h"
#include "sim/tasks.h"
#include "sim/topology.h"
#include "test_sched_util.h"
#include "tests/paths.h"

namespace coconet::exec {
namespace {

using model::sched_test::small_sizes;
using model::sched_test::workload;
using model::sched_test::workload_names;
using LaunchList = std::vector<plan::Launch>;

constexpr int kRankCounts[] = {1, 2, 3, 4, 8};
constexpr int kChunks = 3;  // chunks of overlap groups: ragged against every size

// The launches a rank of `group` issues for `p`.
LaunchList planned(const plan::StepPlan& p, int group) {
  LaunchList out;
  for (const auto& u : p.units)
    for (const auto& l : plan::issue_order(p, u))
      if (p.op(l.op).involves(group)) out.push_back(l);
  return out;
}

LaunchList launches_of(const std::vector<RanLaunch>& ran) {
  LaunchList out;
  for (const auto& r : ran) out.push_back({r.op, r.chunk});
  return out;
}

// The simulator's tasks that a rank of `group` takes part in, as launches.
LaunchList simulated(plan::StepPlan p, const sim::Context& ctx, int group) {
  LaunchList out;
  sim::resolve_collectives(p, ctx);
  for (const auto& t : sim::make_tasks(p, ctx))
    if (t.rank == group || t.peer == group) out.push_back({t.op, t.chunk});
  return out;
}

// Elements of an op's calls on a rank, all chunks together: its part of the op's value.
std::int64_t expected_elements(const plan::StepPlan& p, const plan::Op& op,
                               const std::map<std::string, plan::ValueView>& v) {
  const model::Stmt& s = *p.program->find_stmt(op.fused ? op.fused->head : op.stmts.front());
  switch (op.cls) {
    case plan::OpClass::elementwise: return v.at(s.name).local_numel();
    case plan::OpClass::matmul: return v.at(s.name).local_numel();
    case plan::OpClass::norm: return v.at(s.operands.front()).local_numel();
    case plan::OpClass::rowreduce: return v.at(s.operands.front()).local_numel();
    case plan::OpClass::fused:  // its head collective's calls
    case plan::OpClass::collective: {
      const auto& x = v.at(s.operands.front());
      const auto& y = v.at(s.name);
      if (s.op != model::OpKind::send) return x.local_numel();
      return (x.here ? x.local_numel() : 0) + (y.here ? y.local_numel() : 0);
    }
  }
  return -1;
}

// Differences between what a rank ran and the plan, one line each (empty: none).
std::string compare(const plan::StepPlan& p, const std::vector<RanLaunch>& ran, int group, int position,
                    const sim::Context& ctx) {
  std::string diff;
  const LaunchList want = planned(p, group);
  if (launches_of(ran) != want)
    diff += fmt::format("rank ({},{}) issued {} launches, the plan has {}\n", group, position, ran.size(), want.size());
  if (simulated(p, ctx, group) != want) diff += fmt::format("the simulator's tasks for group {} differ\n", group);
  const auto views = plan::rank_views(*p.program, p.sizes, p.ranks_per_group, {group, position});
  std::map<int, std::int64_t> elements;
  for (const auto& r : ran) {
    for (auto e : r.elements) elements[r.op] += e;
    const plan::Op& op = p.op(r.op);
    const bool counted = position == 0 && op.group == group;
    if (counted && int(r.elements.size()) != op.calls.at(std::size_t(r.chunk)))
      diff += fmt::format("rank ({},0) op {} {} chunk {}: {} calls, the plan counts {}\n", group, r.op, op.code,
                          r.chunk, r.elements.size(), op.calls.at(std::size_t(r.chunk)));
  }
  for (const auto& [op, got] : elements) {
    const std::int64_t need = expected_elements(p, p.op(op), views);
    if (got != need)
      diff += fmt::format("rank ({},{}) op {} {}: {} elements, its view holds {}\n", group, position, op,
                          p.op(op).code, got, need);
  }
  return diff;
}

// Rank 0's collective calls against the bytes each collective is priced at.
std::string compare_bytes(const plan::StepPlan& p, const std::vector<RanLaunch>& ran) {
  std::map<int, double> bytes;
  for (const auto& r : ran) {
    const plan::Op& op = p.op(r.op);
    if (op.cls != plan::OpClass::collective) continue;
    const model::Stmt& s = *p.program->find_stmt(op.stmts.front());
    const double elem = model::bytes_of(p.program->type_of(s.operands.front()).dtype);
    for (auto e : r.elements) bytes[r.op] += double(e) * elem;
  }
  std::string diff;
  const double ranks = p.ranks_per_group;
  for (const auto& [id, ran_bytes] : bytes) {
    const plan::Op& op = p.op(id);
    const double priced = op.work.collectives.front().bytes;
    const model::OpKind k = op.work.collectives.front().op;
    const double x_rows = double(model::eval_shape(p.program->type_of(op.stmts.front()).shape, p.sizes).at(0));
    bool ok = priced == ran_bytes;
    if (k == model::OpKind::allgather) ok = priced == ran_bytes * ranks;
    if (k == model::OpKind::reducescatter) ok = std::fmod(x_rows, ranks) != 0 ? priced >= ran_bytes : priced == ran_bytes;
    if (!ok) diff += fmt::format("op {} {}: priced {} B, rank 0 moved {} B\n", id, op.code, priced, ran_bytes);
  }
  return diff;
}

// Runs one step of `schedule` as every rank of the job; returns each rank's launches.
std::vector<std::vector<RanLaunch>> run_every_rank(const plan::StepPlan& p) {
  const int world = p.ranks_per_group * p.groups;
  std::vector<std::vector<RanLaunch>> out;
  for (int r = 0; r < world; ++r) {
    testing::DryBackend backend(r, world, p.caps);
    backend.set_groups(p.groups);
    Executor ex(backend, p);
    (void)ex.run_step();
    out.push_back(ex.ran());
  }
  return out;
}

class PlanExecution : public ::testing::TestWithParam<std::string> {};

void expect_every_rank_runs_the_plan(const model::Program& prog, std::vector<model::Bindings> sizes_list = {}) {
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "2"}});
  if (sizes_list.empty()) sizes_list = small_sizes(prog);
  for (const plan::Capabilities& caps : {plan::cuda_capabilities(), plan::cpu_capabilities()})
    for (const auto& sizes : sizes_list)
      for (int ranks : kRankCounts)
        for (model::Schedule s : model::enumerate_schedules(prog)) {
          s.knobs.chunks = kChunks;
          const model::Bindings b = prog.bind(sizes);
          const plan::StepPlan p = plan::lower(s, b, ranks, caps);
          SCOPED_TRACE(fmt::format("{} on {} P={} {}", s.name(), plan::to_string(caps.backend), ranks,
                                   b.begin()->second));
          const sim::Context ctx{t, ranks, b, caps.backend};
          const auto ran = run_every_rank(p);
          for (std::size_t r = 0; r < ran.size(); ++r)
            EXPECT_EQ(compare(p, ran[r], int(r) / ranks, int(r) % ranks, ctx), "");
          EXPECT_EQ(compare_bytes(p, ran.front()), "");
        }
}

TEST_P(PlanExecution, EveryRankRunsThePlanTheSimulatorPrices) { expect_every_rank_runs_the_plan(workload(GetParam())); }

// The tests-only transformer workload: its row reductions are ops of their
// own, run in as many calls and over as many elements as the plan prices.
TEST(PlanExecutionRows, LayerNormAndSoftmax) {
  expect_every_rank_runs_the_plan(
      model::load_program(coconet::test::source_root() + "/tests/workloads/layernorm_softmax.yaml"));
}

// The transformer layer (batched matmuls over heads, element-wise ops over
// 3-D values as rows of their last dimension) and the alltoall workload.
TEST(PlanExecutionRows, TransformerLayer) {
  expect_every_rank_runs_the_plan(workload("transformer_layer"), {{{"B", 1}, {"S", 3}, {"NH", 3}, {"D", 2}},
                                                                  {{"B", 2}, {"S", 4}, {"NH", 4}, {"D", 2}}});
}

TEST(PlanExecutionRows, Alltoall) {
  expect_every_rank_runs_the_plan(
      model::load_program(coconet::test::source_root() + "/tests/workloads/alltoall_ulysses.yaml"));
}

// The blocks of an alltoall, exchanged by hand between P simulated ranks,
// put every element where the output's layout says (ragged and empty slices
// included), both ways between rows and columns.
TEST(AlltoallBlocks, ExchangedByHandTheyReSliceTheTensor) {
  const auto program = [](int from, int to) {
    return model::ProgramBuilder("a2a")
        .param("R", 7)
        .param("C", 5)
        .tensor("x", model::DType::f32, {"R", "C"}, model::Layout::sliced(from))
        .stmt("y = alltoall(x, " + std::to_string(to) + ")")
        .output("y")
        .build();
  };
  for (const auto& [from, to] : {std::pair{0, 1}, std::pair{1, 0}})
    for (int p : {1, 2, 3, 4, 8}) {
      const model::Program prog = program(from, to);
      std::vector<RankValues> ranks;
      for (int r = 0; r < p; ++r) ranks.emplace_back(prog, prog.bind(), p, 0, r);
      // Buffer 2r holds rank r's x (its elements' global indices), 2r+1 its y.
      std::vector<std::vector<double>> buf(2 * std::size_t(p));
      std::vector<AlltoallBlocks> blocks;
      for (int r = 0; r < p; ++r) {
        ValueInfo x = ranks[std::size_t(r)].at("x"), y = ranks[std::size_t(r)].at("y");
        x.buffer = 2 * r;
        y.buffer = 2 * r + 1;
        auto& xb = buf[std::size_t(x.buffer)];
        for (std::int64_t i = 0; i < x.local_rows; ++i)
          for (std::int64_t j = 0; j < x.local_cols; ++j) xb.push_back(double((x.row_begin + i) * 5 + x.col_begin + j));
        buf[std::size_t(y.buffer)].assign(std::size_t(y.local_numel()), -1.0);
        blocks.push_back(alltoall_blocks(x, y, p, r));
      }
      for (int q = 0; q < p; ++q)
        for (int r = 0; r < p; ++r) {  // q's send[r] lands in r's recv[q]
          const Block2d& s = blocks[std::size_t(q)].send[std::size_t(r)];
          const Block2d& d = blocks[std::size_t(r)].recv[std::size_t(q)];
          ASSERT_EQ(s.rows, d.rows);
          ASSERT_EQ(s.cols, d.cols);
          for (std::int64_t i = 0; i < s.rows; ++i)
            for (std::int64_t j = 0; j < s.cols; ++j)
              buf[std::size_t(d.buffer)][std::size_t(d.offset + i * d.stride + j)] =
                  buf[std::size_t(s.buffer)][std::size_t(s.offset + i * s.stride + j)];
        }
      for (int r = 0; r < p; ++r) {
        const ValueInfo& y = ranks[std::size_t(r)].at("y");
        const auto& yb = buf[2 * std::size_t(r) + 1];
        for (std::int64_t i = 0; i < y.local_rows; ++i)
          for (std::int64_t j = 0; j < y.local_cols; ++j)
            EXPECT_EQ(yb[std::size_t(i * y.local_cols + j)], double((y.row_begin + i) * 5 + y.col_begin + j))
                << from << "->" << to << " P=" << p << " rank " << r;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Workloads, PlanExecution, ::testing::ValuesIn(workload_names()),
                         [](const auto& info) { return info.param; });

// The comparison can fail: a plan whose unit was cut differently after
// lowering runs differently from the plan the simulator prices.
TEST(PlanExecution, AChangedChunkCountIsCaught) {
  const model::Program prog = workload("megatron_mlp");
  for (model::Schedule s : model::enumerate_schedules(prog)) {
    if (s.overlaps.empty()) continue;
    s.knobs.chunks = 4;
    const model::Bindings b = prog.bind({{"B", 2}, {"S", 4}, {"H", 4}});
    const plan::StepPlan priced = plan::lower(s, b, 2, plan::cpu_capabilities());
    plan::StepPlan ran = priced;
    for (auto& u : ran.units) u.chunks = u.chunks > 1 ? 2 : u.chunks;
    const sim::Context ctx{sim::load_topology("dgx-h100"), 2, b, plan::BackendKind::cpu};
    EXPECT_NE(compare(priced, run_every_rank(ran).front(), 0, 0, ctx), "") << s.name();
    return;
  }
  FAIL() << "megatron_mlp has no overlapped schedule";
}

// A tile unit whose collective is one call (the cuda backend's,
// Capabilities::tile_one_collective) records its launches as the plan
// issues them, each block's GEMM calls and collective calls as the plan
// counts them, every element of the views once, on every rank. Shown to
// fail: with the allreduce's calls not recorded, "op 1 AR chunk 0: 0 calls,
// the plan counts 1".
TEST(PlanExecution, AResidentTileUnitRunsThePlan) {
  const model::Program prog = workload("megatron_mlp");
  const sim::Topology t = sim::load_topology("dgx-h100");
  int checked = 0;
  for (model::Schedule s : model::enumerate_schedules(prog)) {
    if (s.name() != "ol(MM,RS)-C-AG" && s.name() != "ol(MM,AR)-C") continue;
    s.knobs.chunks = kChunks;
    s.knobs.overlap = model::Grain::tile;
    for (int ranks : kRankCounts) {
      const model::Bindings b = prog.bind({{"B", 2}, {"S", 7}, {"H", 8}});
      const plan::StepPlan p = plan::lower(s, b, ranks, plan::cuda_capabilities());
      ASSERT_TRUE(std::any_of(p.units.begin(), p.units.end(), [](const plan::Unit& u) { return u.tile; }));
      const sim::Context ctx{t, ranks, b, plan::BackendKind::cuda};
      const auto ran = run_every_rank(p);
      for (std::size_t r = 0; r < ran.size(); ++r)
        EXPECT_EQ(compare(p, ran[r], 0, int(r), ctx), "") << s.name() << " P=" << ranks;
      EXPECT_EQ(compare_bytes(p, ran.front()), "") << s.name() << " P=" << ranks;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(std::size(kRankCounts)));
}

// A fused op reaches the backend whole: one call per chunk, its pieces and
// passes as the plan cut them, the gradient shard and the new weights' shard
// in scratch (no buffer of their own), the allgather in place.
TEST(PlanExecution, AFusedOpGoesToTheBackendWhole) {
  const model::Program prog = workload("adam");
  for (auto s : model::enumerate_schedules(prog)) {
    if (s.name() != "fuse(RS-C-AG)+asSlice(m,v)") continue;
    plan::Capabilities caps = plan::cpu_capabilities();
    caps.fused_piece_bytes = 16;  // 37 f16 elements on 2 ranks: 19 on rank 0, in pieces of 8 elements
    const plan::StepPlan p = plan::lower(s, prog.bind({{"N", 37}}), 2, caps);
    ASSERT_EQ(p.ops.at(0).fused->pieces, 3);
    testing::DryBackend backend(1, 2, p.caps);
    backend.set_groups(1);
    Executor ex(backend, p);
    (void)ex.run_step();
    ASSERT_EQ(backend.fused_calls().size(), 1u);
    const FusedCall& call = backend.fused_calls().front();
    ASSERT_EQ(call.passes.size(), 1u);
    ASSERT_EQ(call.passes[0].pieces.size(), 3u);
    std::int64_t shard = 0;
    for (const auto& piece : call.passes[0].pieces) {
      ASSERT_EQ(piece.heads.size(), 1u);
      EXPECT_EQ(piece.heads[0].kind, HeadCall::Kind::reduce_scatter);
      ASSERT_EQ(piece.computes.size(), 1u);
      shard += piece.computes[0].block.rows;
      ASSERT_EQ(piece.gathers.size(), 1u);
      const auto& g = piece.gathers[0];
      EXPECT_EQ(g.in.offset, g.parts[1].offset);  // rank 1 gathers in place
      EXPECT_EQ(g.in.buffer, g.parts[1].buffer);
    }
    EXPECT_EQ(shard, 18);  // rank 1's slice of 37 rows
    EXPECT_EQ(ex.values().at("g1.rs").buffer, -1);
    EXPECT_EQ(ex.values().at("w1.s").buffer, -1);
    EXPECT_GE(ex.values().at("m1").buffer, 0);
    return;
  }
  FAIL() << "adam has no fuse(RS-C-AG)+asSlice(m,v)";
}

}  // namespace
}  // namespace coconet::exec
