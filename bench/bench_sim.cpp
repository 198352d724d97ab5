// Benchmarks of performance prediction (goals from the issue):
//   BM_CollectivePredict  one analytic collective prediction, auto algorithm and
//                         protocol: at least 1,000,000 per second on one core
//   BM_TuneDefault        the embedded default experiment through the tuner
//                         (every schedule x knob setting): under 1 s
//   BM_Simulate4096       one adam step (N = 335,708,160) with fuse(RS-C-AG) on
//                         512 nodes x 8 H100: under 1 s
#include <benchmark/benchmark.h>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"
#include "sim/collective.h"
#include "sim/predict.h"
#include "sim/simulator.h"

namespace {

using namespace coconet;

void BM_CollectivePredict(benchmark::State& state) {
  const sim::Topology t = sim::load_topology("dgx-h100");
  sim::CollectiveRequest r{model::OpKind::allreduce, 0, sim::place(t, t.total_gpus())};
  double bytes = 8;
  double sink = 0;
  for (auto _ : state) {
    r.bytes = bytes;
    sink += sim::predict_collective(t, r).time_us();
    bytes = bytes < 8e9 ? bytes * 2 : 8;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CollectivePredict);

void BM_TuneDefault(benchmark::State& state) {
  const model::Experiment e = model::experiment_from_argument(std::nullopt);
  sim::PredictOptions o;
  o.tune_space = true;
  std::int64_t evaluated = 0;
  for (auto _ : state) {
    const auto reports = sim::predict_experiment(e, o);
    for (const auto& r : reports) evaluated += r.result.evaluated;
    benchmark::DoNotOptimize(reports.data());
  }
  state.counters["settings"] = benchmark::Counter(double(evaluated) / double(state.iterations()));
}
BENCHMARK(BM_TuneDefault)->Unit(benchmark::kMillisecond);

void BM_Simulate4096(benchmark::State& state) {
  const model::Program p = model::load_program(model::resolve_workload("adam"));
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "512"}});
  const sim::Context ctx{t, t.total_gpus(), {{"N", 335708160}}};
  model::Schedule fused;
  for (auto& s : model::enumerate_schedules(p))
    if (s.name() == "fuse(RS-C-AG)+asSlice(m,v)") fused = s;  // one fused op on cuda
  if (fused.stages.empty()) {
    state.SkipWithError("adam has no fuse(RS-C-AG)+asSlice(m,v) schedule");
    return;
  }
  double sink = 0;
  for (auto _ : state) sink += sim::simulate(fused, ctx).time_us;  // lowering included
  benchmark::DoNotOptimize(sink);
}
BENCHMARK(BM_Simulate4096)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
