// Benchmarks of whole-step prediction (goals from issue 16):
//   BM_StepPredict      one step of GPT-3 175B on 128 nodes x 8 H100, its
//                       shipped layout, its layer programs (enumerated and
//                       tuned) and data-parallel blocks tuned afresh (no
//                       cache): no goal of its own (--search's is the goal)
//   BM_StepSearchGpt3   `coconet step models/gpt3-175b.yaml --topology
//                       dgx-h100 --nodes 128 --search` (ZeRO 0-3, GPipe,
//                       the layers and DP blocks through the tuner): under 1 s
//   BM_StepSearchLlama405b  `coconet step llama3-405b --topology dgx-h100
//                       --nodes 256 --search`: 2048 GPUs, tp, cp (ring and
//                       all-gather), pp (uneven stages), vp, dp, micro-batch,
//                       recomputation, ZeRO and the GEMMs' precision (bf16,
//                       fp8): under 2 s (issue 29)
//   BM_StepSearchLlama405bOnePrecision  the same with the model's precision only
//   BM_StepSearchMixtral  `coconet step mixtral-8x7b --topology dgx-h100
//                       --nodes 4 --search`: 32 GPUs, the dense search's
//                       sizes and ep x etp (the experts' layouts) with the MoE
//                       programs through the tuner: under 2 s (issue 32)
//   BM_StepSearchDeepSeekV3  `coconet step deepseek-v3 --topology dgx-h100
//                       --nodes 128 --search`: 1024 GPUs, the MoE search's
//                       sizes with the MLA programs (workloads/mla_layer_*)
//                       through the tuner
//   BM_StepTrace        the Chrome trace of that step's shipped layout
#include <benchmark/benchmark.h>

#include "sim/topology.h"
#include "step/compose.h"
#include "step/search.h"
#include "step/trace.h"

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
  int evaluated = 0, tuned = 0, layers = 0;
  for (auto _ : state) {
    const step::SearchResult r = step::search_layouts(s, t);
    evaluated = r.evaluated;
    tuned = r.tuned_blocks;
    layers = r.tuned_layers;
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts"] = evaluated;
  state.counters["tuned_blocks"] = tuned;
  state.counters["tuned_layers"] = layers;
}
BENCHMARK(BM_StepSearchGpt3)->Unit(benchmark::kMillisecond);

void BM_StepSearchDeepSeekV3(benchmark::State& state) {
  const step::ModelSpec s = step::load_model("deepseek-v3");
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "128"}});
  int evaluated = 0, layers = 0;
  for (auto _ : state) {
    const step::SearchResult r = step::search_layouts(s, t);
    evaluated = r.evaluated;
    layers = r.tuned_layers;
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts"] = evaluated;
  state.counters["tuned_layers"] = layers;
}
BENCHMARK(BM_StepSearchDeepSeekV3)->Unit(benchmark::kMillisecond)->Iterations(1);

void search_llama405b(benchmark::State& state, bool vary_precision) {
  const step::ModelSpec s = step::load_model("llama3-405b");
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "256"}});
  step::SearchOptions o;
  o.vary_precision = vary_precision;
  step::SearchResult r;
  for (auto _ : state) {
    r = step::search_layouts(s, t, o);
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts"] = r.evaluated;
  state.counters["priced"] = r.priced;
  state.counters["laid_out"] = r.laid_out;
  state.counters["tuned_layers"] = r.tuned_layers;
}
void BM_StepSearchLlama405b(benchmark::State& state) { search_llama405b(state, true); }
void BM_StepSearchLlama405bOnePrecision(benchmark::State& state) { search_llama405b(state, false); }
BENCHMARK(BM_StepSearchLlama405b)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StepSearchLlama405bOnePrecision)->Unit(benchmark::kMillisecond);

void BM_StepSearchMixtral(benchmark::State& state) {
  const step::ModelSpec s = step::load_model("mixtral-8x7b");
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "4"}});
  step::SearchResult r;
  for (auto _ : state) {
    r = step::search_layouts(s, t);
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts"] = r.evaluated;
  state.counters["priced"] = r.priced;
  state.counters["laid_out"] = r.laid_out;
  state.counters["tuned_layers"] = r.tuned_layers;
}
BENCHMARK(BM_StepSearchMixtral)->Unit(benchmark::kMillisecond);

void BM_StepTrace(benchmark::State& state) {
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "128"}});
  const step::StepReport r = step::predict_step(step::load_model("gpt3-175b"), t);
  for (auto _ : state) {
    const std::string json = step::step_trace_json(r);
    benchmark::DoNotOptimize(json.data());
  }
}
BENCHMARK(BM_StepTrace)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
