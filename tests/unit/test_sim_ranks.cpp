// Per-rank simulation (issue 11, item 2): classes of provably alike ranks,
// collectives bulk-synchronous over a group's classes. On a symmetric cluster
// every rank simulated on its own gives the fast path's times exactly; on an
// asymmetric one the classes give what every rank on its own gives; a
// straggler slows a step by what its own tasks take; a last node with fewer
// GPUs changes the prediction; traces have a process per class or per rank.
#include <algorithm>
#include <set>
#include <string>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace coconet::sim {
namespace {

const char* const kWorkloads[] = {"sgd", "adam", "lamb", "megatron_mlp", "megatron_attention", "gpt3_pipeline"};
constexpr double kExact = 1e-12;  // relative: the same arithmetic, nothing else

model::Program workload(const std::string& name) { return model::load_program(model::resolve_workload(name)); }

Context context_on(const Topology& t, const model::Program& p, RankMode mode = RankMode::classes) {
  Context c{t, std::max(1, t.total_gpus() / p.groups()), p.params};
  c.rank_mode = mode;
  return c;
}

bool same(double a, double b) { return std::abs(a - b) <= kExact * std::max(std::abs(a), std::abs(b)); }

// Every stage's start and end, and the step, agree.
void expect_same_times(const SimResult& a, const SimResult& b, const std::string& what) {
  EXPECT_TRUE(same(a.time_us, b.time_us)) << what << ": " << a.time_us << " vs " << b.time_us;
  ASSERT_EQ(a.stages.size(), b.stages.size()) << what;
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    EXPECT_TRUE(same(a.stages[s].start_us, b.stages[s].start_us)) << what << " stage " << a.stages[s].code;
    EXPECT_TRUE(same(a.stages[s].end_us, b.stages[s].end_us)) << what << " stage " << a.stages[s].code;
  }
}

// Every shipped workload's schedules (overlapped ones at 1 and 4 chunks), on `t`,
// simulated and predicted in the fast path and per rank; returns the schedules checked.
int compare_modes(const Topology& t, bool expect_equal_classes) {
  int checked = 0;
  for (const char* name : kWorkloads) {
    const model::Program p = workload(name);
    if (t.total_gpus() < p.groups()) continue;
    for (model::Schedule s : model::enumerate_schedules(p))
      for (int chunks : {1, 4}) {
        if (chunks > 1 && s.overlaps.empty()) continue;
        s.knobs.chunks = chunks;
        const Context fast = context_on(t, p);
        const Context every = context_on(t, p, RankMode::every_rank);
        const plan::StepPlan plan = lower_for(s, fast);
        const SimResult a = simulate(plan, fast);
        const SimResult b = simulate(plan, every);
        const std::string what = fmt::format("{} {} chunks={} on {} x{}", name, s.name(), chunks, t.name, t.nodes);
        EXPECT_EQ(int(b.classes.size()), fast.ranks * p.groups()) << what << ": every rank its own class";
        if (expect_equal_classes) {
          EXPECT_EQ(int(a.classes.size()), p.groups()) << what << ": one class per group";
        }
        expect_same_times(a, b, what);
        EXPECT_TRUE(same(predict_analytic(plan, fast).time_us, predict_analytic(plan, every).time_us)) << what;
        ++checked;
      }
  }
  return checked;
}

TEST(PerRank, EveryRankOnItsOwnEqualsTheFastPathOnSymmetricClusters) {
  int checked = 0;
  checked += compare_modes(load_topology("dgx-h100", {{"nodes", "2"}}), true);
  checked += compare_modes(load_topology("dgx-a100", {{"nodes", "1"}}), true);
  EXPECT_GT(checked, 100);
}

// On an asymmetric cluster (a slower node, a straggler, a short last node) the
// classes are exact: simulating every rank on its own gives the same times.
TEST(PerRank, ClassesEqualEveryRankOnAsymmetricClusters) {
  const Topology t = load_topology("dgx-h100", {{"nodes", "3"},
                                                {"last_node_gpus", "4"},
                                                {"node_overrides", "[{node: 1, nvlink_scale: 0.5}]"},
                                                {"stragglers", "[{rank: 3, compute_scale: 0.5, hbm_scale: 0.7}]"}});
  EXPECT_GT(compare_modes(t, false), 50);
}

// The check above can fail: the same comparison between a symmetric cluster
// and one with a straggler finds different times.
TEST(PerRank, AStragglerChangesTimesSoTheComparisonCanFail) {
  const model::Program p = workload("megatron_mlp");
  const model::Schedule s = model::find_schedule(p, "MM-AR-C");
  const Topology sym = load_topology("dgx-h100", {{"nodes", "2"}});
  const Topology slow = load_topology("dgx-h100", {{"nodes", "2"}, {"stragglers", "[{rank: 5, compute_scale: 0.25, "
                                                                                   "hbm_scale: 0.25}]"}});
  EXPECT_FALSE(same(simulate(s, context_on(sym, p)).time_us,
                    simulate(s, context_on(slow, p, RankMode::every_rank)).time_us));
}

// The events of class `c` (its own tasks and the collectives it takes part in).
std::vector<const SimEvent*> events_on(const SimResult& r, int c) {
  std::vector<const SimEvent*> out;
  for (const SimEvent& e : r.events)
    if (e.rank == c || std::find(e.also.begin(), e.also.end(), c) != e.also.end()) out.push_back(&e);
  return out;
}

int class_of_rank(const SimResult& r, int rank) {
  for (std::size_t c = 0; c < r.classes.size(); ++c)
    for (const auto& [a, b] : r.classes[c].ranges)
      if (rank >= a && rank <= b) return int(c);
  return -1;
}

// A straggler on one of 64 nodes: nothing in these schedules overlaps, so
// the step is the straggler's own chain of tasks, each alone (its kernels at
// its rates, the collectives at the slowest member's, its own), summed from
// the straggler class's events; that chain is what a cluster of GPUs all
// like the straggler takes, and longer than the symmetric step.
void expect_straggler_sets_the_step(const std::string& name, const std::string& schedule,
                                    const model::Bindings& sizes, const std::string& scales) {
  const model::Program p = workload(name);
  const model::Schedule s = model::find_schedule(p, schedule);
  const Topology sym = load_topology("dgx-h100", {{"nodes", "64"}});
  const Topology asym = load_topology("dgx-h100", {{"nodes", "64"}, {"stragglers", "[{rank: 17, " + scales + "}]"}});
  Context a = context_on(sym, p);
  Context b = context_on(asym, p);
  Context c = context_on(sym.scaled(asym.scales_of(17)), p);  // every GPU like the straggler
  for (const auto& [k, v] : sizes) a.sizes[k] = b.sizes[k] = c.sizes[k] = v;
  const SimResult fast = simulate(s, a);
  const SimResult r = simulate(s, b);
  ASSERT_EQ(r.classes.size(), 2u) << "the straggler and everyone else";
  const int straggler = class_of_rank(r, 17);
  ASSERT_GE(straggler, 0);
  EXPECT_EQ(r.classes[std::size_t(straggler)].count, 1);
  double chain = 0;
  for (const SimEvent* e : events_on(r, straggler)) chain += e->alone_us;
  EXPECT_GT(r.time_us, fast.time_us * (1 + 1e-6)) << name << " " << schedule;
  EXPECT_NEAR(r.time_us, chain, 1e-9 * chain) << name << " " << schedule << ": the straggler's own tasks";
  EXPECT_NEAR(simulate(s, c).time_us, chain, 1e-9 * chain) << "a cluster of stragglers takes the same";
  // Each stage's tasks alone are the straggler's (its slowest class), within
  // the stage's span, and they add up to the chain: not a sum over the classes
  // that run side by side (which exceeded the span).
  std::vector<double> own(r.stages.size(), 0.0);  // the straggler's tasks alone, per stage
  for (const SimEvent* e : events_on(r, straggler)) own.at(std::size_t(e->stage)) += e->alone_us;
  double stages = 0;
  for (std::size_t k = 0; k < r.stages.size(); ++k) {
    const auto& st = r.stages[k];
    const std::string where = name + " " + schedule + " stage " + st.code;
    // The straggler's (the slowest; the other class ties where the stage is a collective alone) ...
    EXPECT_NEAR(st.alone_us, own[k], 1e-9 * own[k]) << where;
    // ... and the class named takes that long too.
    double named = 0;
    for (const SimEvent* e : events_on(r, st.alone_class))
      if (e->stage == int(k)) named += e->alone_us;
    EXPECT_NEAR(named, st.alone_us, 1e-9 * named) << where;
    EXPECT_LE(st.alone_us, (st.end_us - st.start_us) * (1 + 1e-9)) << where;
    stages += st.alone_us;
  }
  EXPECT_NEAR(stages, chain, 1e-9 * chain) << name << " " << schedule;
}

TEST(PerRank, AStragglerAtHalfComputeSlowsAdamByItsOwnTasks) {
  // Adam's optimizer is memory-bound: a GPU at half speed is half its FLOP rate and half its HBM.
  expect_straggler_sets_the_step("adam", "fuse(RS-C-AG)", {}, "compute_scale: 0.5, hbm_scale: 0.5");
}

TEST(PerRank, AStragglerAtHalfComputeSlowsAMegatronBlockByItsOwnTasks) {
  // A block whose GEMM is compute-bound on 512 ranks (K = H / 512 = 512): half the FLOP rate alone.
  expect_straggler_sets_the_step("megatron_mlp", "MM-AR-C", {{"H", 262144}}, "compute_scale: 0.5");
}

TEST(PerRank, ALastNodeWithFewerGpusChangesThePrediction) {
  const model::Program p = workload("adam");
  const model::Schedule s = model::find_schedule(p, "fuse(RS-C-AG)");
  const Topology full = load_topology("dgx-h100", {{"nodes", "4"}});
  const Topology part = load_topology("dgx-h100", {{"nodes", "4"}, {"last_node_gpus", "4"}});
  EXPECT_EQ(part.total_gpus(), 28);
  const SimResult a = simulate(s, context_on(full, p));
  const SimResult b = simulate(s, context_on(part, p));
  EXPECT_GT(std::abs(a.time_us - b.time_us), 1e-3 * a.time_us) << "28 ranks, not 32";
  ASSERT_EQ(b.classes.size(), 2u) << "the full nodes' ranks and the last node's";
  EXPECT_EQ(b.classes[1].count, 4);
  EXPECT_EQ(b.classes[1].node_peers, 4);
}

// With a straggler: --trace-ranks classes gives one process per class, named
// for its ranks; all gives one per rank, each with its class's events.
TEST(PerRank, TraceHasAProcessPerClassOrPerRank) {
  const model::Program p = workload("megatron_mlp");
  const model::Schedule s = model::find_schedule(p, "MM-AR-C");
  const Topology t = load_topology("dgx-h100", {{"nodes", "2"}, {"stragglers", "[{rank: 5, compute_scale: 0.5}]"}});
  const SimResult r = simulate(s, context_on(t, p));
  ASSERT_EQ(r.classes.size(), 2u);
  const auto processes = [&](TraceRanks mode) {
    const auto j = nlohmann::json::parse(chrome_trace_json(r, "t", mode));
    std::set<int> named, used;
    for (const auto& e : j.at("traceEvents")) {
      if (e.at("ph") == "M" && e.at("name") == "process_name") named.insert(e.at("pid").get<int>());
      if (e.at("ph") == "X") used.insert(e.at("pid").get<int>());
    }
    EXPECT_EQ(named, used);
    return named.size();
  };
  EXPECT_EQ(processes(TraceRanks::classes), 2u);
  EXPECT_EQ(processes(TraceRanks::all), 16u);
  EXPECT_NE(r.rank_names[0].find("ranks 0-4, 6-15"), std::string::npos) << r.rank_names[0];
  EXPECT_NE(r.rank_names[1].find("rank 5"), std::string::npos) << r.rank_names[1];
  EXPECT_THROW((void)parse_trace_ranks("some"), UserError);
}

}  // namespace
}  // namespace coconet::sim
