// Benchmarks of whole-step prediction (goals from issue 16):
//   BM_StepPredict      one step of GPT-3 175B on 128 nodes x 8 H100, its
//                       shipped layout: microseconds
//   BM_StepSearchGpt3   `coconet step models/gpt3-175b.yaml --topology
//                       dgx-h100 --nodes 128 --search`: under 1 s
#include <benchmark/benchmark.h>

#include "sim/topology.h"
#include "step/compose.h"
#include "step/search.h"

namespace {

using namespace coconet;

void BM_StepPredict(benchmark::State& state) {
  const step::ModelSpec s = step::load_model("gpt3-175b");
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "128"}});
  for (auto _ : state) {
    const step::StepReport r = step::predict_step(s, t);
    benchmark::DoNotOptimize(r.step_us);
  }
}
BENCHMARK(BM_StepPredict)->Unit(benchmark::kMicrosecond);

void BM_StepSearchGpt3(benchmark::State& state) {
  const step::ModelSpec s = step::load_model("gpt3-175b");
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "128"}});
  int evaluated = 0;
  for (auto _ : state) {
    const step::SearchResult r = step::search_layouts(s, t);
    evaluated = r.evaluated;
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts"] = evaluated;
}
BENCHMARK(BM_StepSearchGpt3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
