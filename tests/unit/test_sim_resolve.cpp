// Collective resolution (sim/resolve.h): every collective call of a plan gets
// its algorithm, protocol and channels before pricing, and the simulator
// prices what the plan says. On a topology whose per-channel LL128 ceiling
// is lowered (nccl.channel_GBps 20 instead of 36.7), a fused allreduce that computes beside its
// collectives runs fastest on twice NCCL's default channels, which NCCL's
// own rule (each collective alone, at the default channels) never picks: the
// plan holds the unit's choice, the tasks are priced at it, and a plan not
// resolved, or resolved otherwise, is priced otherwise.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <string>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "sim/resolve.h"
#include "sim/simulator.h"
#include "sim/tasks.h"
#include "sim/topology.h"

namespace coconet::sim {
namespace {

model::Program workload(const std::string& name) {
  return model::load_program(model::resolve_workload(name));
}

model::Schedule schedule(const model::Program& p, const std::string& name) {
  return model::find_schedule(p, name);
}

// dgx-h100 on one node with one channel's LL128 ceiling at `channel_GBps`.
Context context(const model::Program& p, const std::string& channel_GBps, std::int64_t n) {
  Overrides o = {{"nodes", "1"}};
  if (!channel_GBps.empty()) o.emplace_back("nccl.channel_GBps", channel_GBps);
  return Context{load_topology("dgx-h100", o), 8, p.bind({{"N", n}})};
}

// NCCL's own choice for one call of `c` alone: each collective's fastest
// pair at the default channels (sim::predict_collective with auto).
plan::CollectiveChoice nccl_default(const Context& ctx, const plan::Op& op,
                                    const plan::Collective& c) {
  const int calls = op.calls.front();
  const CollectiveCost cost =
      predict_collective(ctx.topology, CollectiveRequest{c.op, c.bytes / calls, ctx.placement()});
  return {cost.algo, cost.proto, cost.channels, false};
}

// The first op of `p` that calls collectives.
const plan::Op& comm_op(const plan::StepPlan& p) {
  for (const auto& op : p.ops)
    if (!op.work.collectives.empty()) return op;
  throw InternalError("no collective in the plan");
}

// The task of `op`'s first chunk.
const Task& task_of(const std::vector<Task>& tasks, int op) {
  for (const auto& t : tasks)
    if (t.op == op && t.chunk == 0 && !t.is_gate) return t;
  throw InternalError("no task of the op");
}

constexpr const char* kFused = "fuse(RS-C-AG)";
constexpr std::int64_t kN = 1 << 22;  // 4M parameters: the f16 gradient 8 MB
constexpr const char* kLowCeiling =
    "20";  // GB/s per channel (36.7 stock): LL128 bound by channels x 20

TEST(Resolve, TheUnitsChoiceDiffersFromNcclsDefaultAndIsPriced) {
  const model::Program p = workload("adam");
  const Context ctx = context(p, kLowCeiling, kN);
  const plan::StepPlan plan = lower_for(schedule(p, kFused), ctx);
  EXPECT_EQ(plan.resolved_on, "dgx-h100");
  const plan::Op& op = comm_op(plan);
  ASSERT_EQ(op.work.collectives.size(), 4u);  // the fused allreduce: RS of g, then AG of w, m, v
  const std::vector<Task> tasks = make_tasks(plan, ctx);
  const Task& t = task_of(tasks, op.id);
  for (const plan::Collective& c : op.work.collectives) {
    ASSERT_EQ(c.chosen.size(), 1u);
    const plan::CollectiveChoice chosen = c.chosen.front();
    const plan::CollectiveChoice nccl = nccl_default(ctx, op, c);
    ASSERT_TRUE(chosen.concrete());
    // The unit's choice: the channels twice NCCL's default (the element-wise
    // work beside the collectives makes the channel count a unit's choice).
    EXPECT_EQ(chosen.channels, kChannelSpread * ctx.topology.nccl.channels)
        << plan::to_string(chosen);
    EXPECT_FALSE(chosen == nccl) << plan::to_string(chosen) << " is NCCL's own choice";
    // The simulator priced that choice: its channels' SMs held, its names in the detail.
    EXPECT_EQ(t.sms_held, chosen.channels * ctx.topology.nccl.sms_per_channel);
    const std::string named =
        fmt::format("{} {}/{} x{} channels", model::to_string(c.op), model::to_string(chosen.algo),
                    model::to_string(chosen.proto), chosen.channels);
    EXPECT_NE(t.detail.find(model::to_string(chosen.algo) + "/" + model::to_string(chosen.proto) +
                            " x" + std::to_string(chosen.channels) + " channels"),
              std::string::npos)
        << named << " not in: " << t.detail;
  }
}

// Without the lowered ceiling NCCL's default channels are the unit's choice
// too: the topology change is what makes the two differ.
TEST(Resolve, OnTheStockTopologyTheUnitKeepsNcclsChannels) {
  const model::Program p = workload("adam");
  const Context ctx = context(p, "", kN);
  const plan::StepPlan plan = lower_for(schedule(p, kFused), ctx);
  for (const plan::Collective& c : comm_op(plan).work.collectives)
    EXPECT_EQ(c.chosen.front().channels, ctx.topology.nccl.channels)
        << plan::to_string(c.chosen.front());
}

// Bypassing the resolution fails: a plan straight from plan::lower is an
// internal error to price, and a plan resolved otherwise is priced otherwise
// (pricing reads the plan; it chooses nothing).
TEST(Resolve, PricingReadsThePlanAndNeverChooses) {
  const model::Program p = workload("adam");
  const Context ctx = context(p, kLowCeiling, kN);
  const model::Schedule s = schedule(p, kFused);
  const plan::StepPlan unresolved = plan::lower(s, ctx.sizes, ctx.ranks, ctx.capabilities());
  EXPECT_THROW((void)make_tasks(unresolved, ctx), InternalError);
  EXPECT_THROW((void)simulate(unresolved, ctx), InternalError);

  plan::StepPlan plan = lower_for(s, ctx);
  const double resolved_us = simulate(plan, ctx).time_us;
  plan::Op& op = plan.ops.at(std::size_t(comm_op(plan).id));
  for (plan::Collective& c : op.work.collectives) c.chosen.front() = nccl_default(ctx, op, c);
  const std::vector<Task> tasks = make_tasks(plan, ctx);
  const Task& t = task_of(tasks, op.id);
  EXPECT_EQ(t.sms_held, ctx.topology.nccl.channels * ctx.topology.nccl.sms_per_channel);
  EXPECT_GT(simulate(plan, ctx).time_us, resolved_us)
      << "NCCL's default priced as the plan now says: slower";
  // A choice cleared is refused, not chosen again.
  op.work.collectives.front().chosen.front() = plan::CollectiveChoice{};
  EXPECT_THROW((void)make_tasks(plan, ctx), InternalError);
}

// Pinned knobs are kept; what they leave open is resolved; an algorithm no
// collective of the op can run falls back to NCCL's own choice per collective.
TEST(Resolve, PinnedKnobsAreKept) {
  const model::Program p = workload("adam");
  const Context ctx = context(p, "", kN);
  model::Schedule s = schedule(p, "AR-C");
  s.knobs = model::Knobs{1, model::Algo::tree, model::Proto::ll128, 4};
  const plan::StepPlan plan = lower_for(s, ctx);
  const plan::CollectiveChoice c = comm_op(plan).work.collectives.front().chosen.front();
  EXPECT_EQ(c, (plan::CollectiveChoice{model::Algo::tree, model::Proto::ll128, 4, false}));
  s = schedule(p, kFused);  // reduce-scatter and all-gather: no tree
  s.knobs = model::Knobs{1, model::Algo::tree, model::Proto::auto_, 0};
  const plan::StepPlan fused = lower_for(s, ctx);
  for (const plan::Collective& x : comm_op(fused).work.collectives)
    EXPECT_EQ(x.chosen.front().algo, model::Algo::ring) << plan::to_string(x.chosen.front());
}

// A collective on one rank exchanges nothing: resolved as local.
TEST(Resolve, OneRankIsLocal) {
  const model::Program p = workload("adam");
  Context ctx = context(p, "", kN);
  ctx.ranks = 1;
  const plan::StepPlan plan = lower_for(schedule(p, "AR-C"), ctx);
  EXPECT_TRUE(comm_op(plan).work.collectives.front().chosen.front().local);
}

}  // namespace
}  // namespace coconet::sim
