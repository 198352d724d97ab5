// Benchmarks of performance prediction (goals from the issue):
//   BM_CollectivePredict  one analytic collective prediction, auto algorithm and
//                         protocol: at least 1,000,000 per second on one core
//   BM_TuneDefault        the embedded default experiment through the tuner
//                         (every schedule x knob setting): under 1 s
//   BM_Simulate4096       one adam step (N = 335,708,160) with fuse(RS-C-AG) on
//                         512 nodes x 8 H100: under 1 s
//   BM_PerRank4096Adam,   one step simulated per rank (every rank its own task
//   BM_PerRank4096Gpt3    stream, not classes) on 512 nodes x 8 H100 with one
//                         straggler (rank 17 at half compute and HBM): adam
//                         fuse(RS-C-AG), gpt3_pipeline ol(RS,fuse(P2P-C),AG) at
//                         2 chunks (and RS-P2P-C-AG, a kernel per rank);
//   BM_PerRank4096Gpt3Kernels  under 1 s and 1 GB resident (peak_RSS_MB: the
//                         process's peak, getrusage; run each alone)
#include <sys/resource.h>

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

// The process's peak resident memory in MB (Linux reports ru_maxrss in KB).
double peak_rss_MB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  constexpr double kKBPerMB = 1024.0;
  return double(u.ru_maxrss) / kKBPerMB;
}

void per_rank_step(benchmark::State& state, const std::string& workload, const std::string& schedule, int chunks,
                   const model::Bindings& sizes) {
  const model::Program p = model::load_program(model::resolve_workload(workload));
  const sim::Topology t = sim::load_topology(
      "dgx-h100", {{"nodes", "512"}, {"stragglers", "[{rank: 17, compute_scale: 0.5, hbm_scale: 0.5}]"}});
  sim::Context ctx{t, t.total_gpus() / p.groups(), p.params};
  for (const auto& [k, v] : sizes) ctx.sizes[k] = v;
  ctx.rank_mode = sim::RankMode::every_rank;
  model::Schedule s = model::find_schedule(p, schedule);
  s.knobs.chunks = chunks;
  double sink = 0;
  std::size_t classes = 0, events = 0;
  for (auto _ : state) {
    const sim::SimResult r = sim::simulate(s, ctx);  // lowering included
    sink += r.time_us;
    classes = r.classes.size();
    events = r.events.size();
  }
  benchmark::DoNotOptimize(sink);
  state.counters["ranks_simulated"] = double(classes);
  state.counters["tasks"] = double(events);
  state.counters["peak_RSS_MB"] = peak_rss_MB();
}

void BM_PerRank4096Adam(benchmark::State& state) {
  per_rank_step(state, "adam", "fuse(RS-C-AG)", 1, {{"N", 335708160}});
}
BENCHMARK(BM_PerRank4096Adam)->Unit(benchmark::kMillisecond);

// predict's best gpt3_pipeline schedule (two groups of 2048 ranks; its element-wise
// part runs inside the fused send), at the chunks predict picks.
void BM_PerRank4096Gpt3(benchmark::State& state) {
  per_rank_step(state, "gpt3_pipeline", "ol(RS,fuse(P2P-C),AG)", 2, {});
}
BENCHMARK(BM_PerRank4096Gpt3)->Unit(benchmark::kMillisecond);

// The same step with the element-wise part a kernel of its own: 2048 compute
// tasks per stage, one per rank, beside the bulk-synchronous collectives.
void BM_PerRank4096Gpt3Kernels(benchmark::State& state) {
  per_rank_step(state, "gpt3_pipeline", "RS-P2P-C-AG", 1, {});
}
BENCHMARK(BM_PerRank4096Gpt3Kernels)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
