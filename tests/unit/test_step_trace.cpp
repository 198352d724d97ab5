// The pipeline schedules (step/pipeline.h) and the step's Chrome trace
// (step/trace.h): every stage runs every micro-batch's chunks once, in an
// order that never deadlocks; laid out with equal chunk times, GPipe, 1F1B and
// interleaved 1F1B span (m v + pp - 1) chunk steps (Narayanan et al., SC'21),
// while a naive order does not; and the trace of a priced step ends at its
// step time, its events never overlap on a thread, and each stage's busy
// times are the breakdown's.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "model/error.h"
#include "sim/topology.h"
#include "step/compose.h"
#include "step/pipeline.h"
#include "step/trace.h"

namespace coconet::step {
namespace {

double span(const std::vector<PlacedOp>& ops) {
  double end = 0;
  for (const auto& p : ops) end = std::max(end, p.end_us);
  return end;
}

struct Case {
  PipeSchedule schedule;
  int pp, v, m;
};

const Case kCases[] = {
    {PipeSchedule::gpipe, 4, 1, 8},         {PipeSchedule::one_f_one_b, 4, 1, 8},
    {PipeSchedule::one_f_one_b, 8, 1, 3},   {PipeSchedule::one_f_one_b, 1, 1, 5},
    {PipeSchedule::interleaved, 4, 2, 8},   {PipeSchedule::interleaved, 4, 4, 8},
    {PipeSchedule::interleaved, 2, 2, 2},   {PipeSchedule::interleaved, 16, 2, 192},
};

TEST(StepPipeline, EveryStageRunsEveryChunkOfEveryMicroBatchOnce) {
  for (const Case& c : kCases) {
    const auto orders = stage_orders(c.schedule, c.pp, c.v, c.m);
    ASSERT_EQ(orders.size(), std::size_t(c.pp));
    for (const auto& order : orders) {
      std::set<std::tuple<int, int, int>> seen;
      for (const PipeOp& op : order) {
        EXPECT_TRUE(seen.insert({int(op.pass), op.micro_batch, op.chunk}).second);
        EXPECT_LT(op.micro_batch, c.m);
        EXPECT_LT(op.chunk, c.v);
      }
      EXPECT_EQ(seen.size(), std::size_t(2 * c.m * c.v));
    }
  }
}

TEST(StepPipeline, EqualChunkTimesSpanTheCompositionsSteps) {
  const double f = 1.0, b = 2.3;  // a backward about twice a forward, not a multiple of it
  for (const Case& c : kCases) {
    const auto ops = lay_out(stage_orders(c.schedule, c.pp, c.v, c.m), c.v, c.m, f, b);
    EXPECT_EQ(ops.size(), std::size_t(2 * c.pp * c.m * c.v));
    EXPECT_NEAR(span(ops), (c.m * c.v + c.pp - 1) * (f + b), 1e-9 * span(ops))
        << to_string(c.schedule) << " pp " << c.pp << " v " << c.v << " m " << c.m;
  }
}

TEST(StepPipeline, TheLowerBoundIsTheSpanForEqualChunksAndBelowItOtherwise) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.1, 5.0);
  int strictly_below = 0;
  for (const Case& c : kCases) {
    const std::size_t n = std::size_t(c.pp) * std::size_t(c.v);
    const auto orders = stage_orders(c.schedule, c.pp, c.v, c.m);
    const std::vector<double> f(n, 1.0), b(n, 2.3);
    EXPECT_NEAR(span_lower_bound_us(c.pp, c.v, c.m, f, b), span_us(orders, c.v, c.m, f, b), 1e-9 * c.m * c.v * c.pp)
        << to_string(c.schedule) << " pp " << c.pp << " v " << c.v << " m " << c.m;
    for (int trial = 0; trial < 20; ++trial) {  // uneven stages: never above the laid-out span
      std::vector<double> fu(n), bu(n);
      for (std::size_t k = 0; k < n; ++k) fu[k] = time(rng), bu[k] = time(rng);
      const double bound = span_lower_bound_us(c.pp, c.v, c.m, fu, bu), span = span_us(orders, c.v, c.m, fu, bu);
      EXPECT_LE(bound, span * (1 + 1e-12));
      if (bound < span * (1 - 1e-9)) ++strictly_below;
    }
  }
  // With uneven stages the bound is below the span somewhere: the check above
  // compares two different computations, not one with itself.
  EXPECT_GT(strictly_below, 0);
}

TEST(StepPipeline, AnUnpipelinedOrderIsSlowerAndABrokenOneDeadlocks) {
  // Each micro-batch through both chunks and back before the next starts: the
  // span check above would see its longer span.
  const int pp = 4, v = 2, m = 8;
  std::vector<std::vector<PipeOp>> serial(pp);
  for (auto& order : serial)
    for (int j = 0; j < m; ++j)
      order.insert(order.end(), {{Pass::forward, j, 0}, {Pass::forward, j, 1}, {Pass::backward, j, 1},
                                 {Pass::backward, j, 0}});
  EXPECT_GT(span(lay_out(serial, v, m, 1.0, 2.0)), (m * v + pp - 1) * 3.0 + 1);
  auto broken = stage_orders(PipeSchedule::one_f_one_b, pp, 1, m);
  std::reverse(broken.back().begin(), broken.back().end());  // the last stage's first op a backward
  EXPECT_THROW((void)lay_out(broken, 1, m, 1.0, 2.0), InternalError);
}

// ---- the trace -----------------------------------------------------------------------

const char* const kSmall = R"(name: small
model: {layers: 8, hidden: 1024, heads: 16, sequence: 1024, vocabulary: 32000}
training: {micro_batch: 2, global_batch: 64}
parallel: {tp: 2, pp: 2}
)";

StepReport priced(const Overrides& o, int nodes = 1) {
  return predict_step(parse_model(kSmall, "small.yaml", o),
                      sim::load_topology("dgx-a100", {{"nodes", std::to_string(nodes)}}));
}

void expect_trace_matches(const StepReport& r, const std::string& what) {
  SCOPED_TRACE(what);
  const auto events = step_trace_events(r);
  ASSERT_FALSE(events.empty());
  double end = 0;
  std::map<int, std::map<std::string, double>> busy;  // stage -> category -> us
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> threads;
  for (const auto& e : events) {
    EXPECT_GT(e.dur_us, 0) << e.name;
    end = std::max(end, e.start_us + e.dur_us);
    busy[e.stage][e.category] += e.dur_us;
    threads[{e.stage, int(e.thread)}].push_back({e.start_us, e.start_us + e.dur_us});
  }
  EXPECT_NEAR(end, r.step_us, 1e-9 * r.step_us);
  for (auto& [key, spans] : threads) {
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i)
      EXPECT_GE(spans[i].first, spans[i - 1].second * (1 - 1e-12) - 1e-9) << "stage " << key.first;
  }
  const Breakdown& b = r.breakdown;
  ASSERT_EQ(busy.size(), std::size_t(r.layout.pp));
  for (auto& [stage, cat] : busy) {
    // The slowest stage's busy times are the breakdown's; the others' (fewer
    // layers, no output layer) at most.
    const double compute = cat["forward"] + cat["backward"] + cat["recompute"];
    if (stage == r.slowest_stage) {
      EXPECT_NEAR(compute, b.compute_us, 1e-9 * b.compute_us);
      EXPECT_NEAR(cat["tp"], b.tp_comm_us, 1e-9 * b.tp_comm_us + 1e-9);
      EXPECT_NEAR(cat["cp"], b.cp_comm_us, 1e-9 * b.cp_comm_us + 1e-9);
    } else {
      EXPECT_LE(compute + cat["tp"] + cat["cp"], (b.compute_us + b.tp_comm_us + b.cp_comm_us) * (1 + 1e-9));
    }
    EXPECT_NEAR(cat["dp"], b.dp_comm_us, 1e-9 * b.dp_comm_us + 1e-9);
    EXPECT_NEAR(cat["optimizer"], b.optimizer_us, 1e-9 * b.optimizer_us + 1e-9);
    // Every stage sends on each of its 2 m v chunk steps but the first
    // virtual stage's backwards and the last one's forwards.
    const double m = double(r.layout.micro_batches);
    const double ends = stage == 0 || stage == r.layout.pp - 1 ? m : 0.0;
    const double sends = r.layout.pp > 1 ? 2 * m * r.layout.virtual_stages - ends : 0.0;
    EXPECT_NEAR(cat["pp_send"], sends * r.send_us, 1e-9 * b.pp_p2p_us + 1e-9);
  }
}

TEST(StepTrace, EndsAtTheStepTimeWithTheBreakdownsBusyTimes) {
  expect_trace_matches(priced({}), "1f1b");
  expect_trace_matches(priced({{"parallel.schedule", "gpipe"}}), "gpipe");
  expect_trace_matches(priced({{"parallel.schedule", "interleaved"}, {"parallel.virtual_stages", "2"},
                               {"parallel.recompute", "full"}, {"parallel.zero", "3"}}),
                       "interleaved, full recomputation, ZeRO 3");
  expect_trace_matches(priced({{"parallel.pp", "1"}, {"parallel.recompute", "selective"}}), "no pipeline");
  expect_trace_matches(priced({{"parallel.pp", "4"}, {"parallel.zero", "1"}}, 2), "two nodes, ZeRO 1");
  expect_trace_matches(predict_step(load_model("gpt3-175b"), sim::load_topology("dgx-h100", {{"nodes", "128"}})),
                       "gpt3-175b");
}

TEST(StepTrace, ABrokenBreakdownIsCaught) {
  // The check above compares the trace with the breakdown and the step time:
  // a report whose exposed DP time does not follow from its stages fails it.
  static StepReport broken;  // EXPECT_NONFATAL_FAILURE's statement sees no locals
  broken = priced({});
  broken.breakdown.dp_comm_us = 2 * broken.breakdown.dp_comm_us + 1000;
  EXPECT_NONFATAL_FAILURE(expect_trace_matches(broken, "broken"), "");
}

TEST(StepTrace, JsonNamesEveryStageAndThread) {
  const StepReport r = priced({{"parallel.pp", "4"}, {"parallel.schedule", "interleaved"},
                               {"parallel.virtual_stages", "2"}}, 2);
  const auto j = nlohmann::json::parse(step_trace_json(r));
  int processes = 0, threads = 0, complete = 0;
  double end = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "M" && e["name"] == "thread_name") ++threads;
    if (e["ph"] == "X") {
      ++complete;
      end = std::max(end, e["ts"].get<double>() + e["dur"].get<double>());
    }
  }
  EXPECT_EQ(processes, 4);
  EXPECT_EQ(threads, 8);
  EXPECT_EQ(std::size_t(complete), step_trace_events(r).size());
  EXPECT_NEAR(end, r.step_us, 1e-9 * r.step_us);
  EXPECT_DOUBLE_EQ(j["otherData"]["time_us"].get<double>(), r.step_us);
  // Stage 1 of 4 with 2 chunks holds layers 1 and 5 (8 layers, one per virtual stage).
  bool named = false;
  for (const auto& e : j["traceEvents"])
    if (e["name"] == "process_name" && e["pid"] == 1) named = e["args"]["name"] == "pipeline stage 1 (layers 1-1, 5-5)";
  EXPECT_TRUE(named);
  // A model name is the file's: quoted as JSON.
  StepReport odd = r;
  odd.spec.name = "a \"quoted\" \\ name";
  EXPECT_EQ(nlohmann::json::parse(step_trace_json(odd))["otherData"]["title"].get<std::string>().rfind(odd.spec.name, 0),
            0u);
}

}  // namespace
}  // namespace coconet::step
