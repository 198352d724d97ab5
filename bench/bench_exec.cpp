// The cpu backend's executions of what the transformations promise:
// - Does overlap really overlap? megatron_mlp at a size where both the
//   matmul and the allreduce take milliseconds: the overlapped unit
//   ol(MM,AR) of the overlapped schedule against the sum of the MM and AR
//   stages of the unscheduled program (MM-AR-C), measured in the same run.
// - Do tiles pay? megatron_mlp's ol(MM,RS) and ol(MM,fuse(RS-C-AG)) with
//   overlap: tile (one GEMM, its blocks taken by the collective as they
//   complete) against overlap: chunk (GEMM calls per chunk), same run.
// - Does fusing pay? adam's fuse(RS-C-AG)+asSlice(m,v), one fused op, against
//   RS-C-AG+asSlice(m,v), the same stages one after another, at N = 2^24 on
//   2 ranks: the step's median time and the bytes of state each touches per
//   parameter (counted call by call by the executor, exec/bytes_touched.h).
// - Does a reduce-scatter cost what its bytes say? The backend's
//   reduce_scatter against its allreduce of the same 2^24 f16 elements on 2
//   ranks, out of place and in place: a ring reduce-scatter moves and reduces
//   half of what an allreduce does, so it should take about half its time.
//
// Run under mpirun with 2 ranks (`cmake --build build --target bench_exec`
// does it): every rank runs the same fixed number of iterations (an
// adaptive iteration count would let ranks disagree and deadlock in a
// collective); times are the slowest rank's; only rank 0 reports.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "exec/executor.h"
#include "exec/runtime.h"
#include "exec/mpi_session.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"

namespace {

using namespace coconet;

// Tall and narrow, so the GEMM (M x 4H/P x H) and the allreduce (M x H f16)
// take comparable times on a small CPU.
constexpr std::int64_t kB = 16, kS = 2048, kH = 64;
constexpr int kIterations = 10;

std::unique_ptr<exec::Backend>& backend() {
  static std::unique_ptr<exec::Backend> b = exec::make_backend("cpu");
  return b;
}

// The first schedule that overlaps a matmul with what follows it, preferably
// with nothing but the allreduce of its output (ol(MM,AR)); null when none.
const model::Schedule* overlapped_matmul(const std::vector<model::Schedule>& all) {
  const model::Schedule* any = nullptr;
  for (const auto& s : all) {
    if (s.overlaps.empty()) continue;
    const auto& g = s.overlaps.front();
    const auto& first = s.stages[static_cast<std::size_t>(g.first)];
    const auto& last = s.stages[static_cast<std::size_t>(g.last)];
    if (first.kind != model::StageKind::matmul) continue;
    const bool just_ar = g.last == g.first + 1 && last.kind == model::StageKind::collective &&
                         s.program.find_stmt(last.stmts.front())->op == model::OpKind::allreduce;
    if (just_ar) return &s;
    if (any == nullptr) any = &s;
  }
  return any;
}

// Median time of each unit of the executor's plan over `steps` steps, slowest rank's.
std::vector<double> unit_times(exec::Executor& ex, exec::Backend& b, int steps) {
  const std::size_t units = ex.plan().units.size();
  std::vector<std::vector<double>> t(units);
  for (int i = 0; i < steps; ++i) {
    b.barrier();
    auto times = ex.run_step();
    b.host_allreduce(times, model::ReduceOp::max);
    for (std::size_t u = 0; u < units; ++u) t[u].push_back(times[u]);
  }
  std::vector<double> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

// The summed median time of the units of `ex` that `pick` selects.
template <typename Pick>
double time_of(exec::Executor& ex, exec::Backend& b, Pick pick) {
  const auto t = unit_times(ex, b, 3);
  double sum = 0;
  for (std::size_t u = 0; u < t.size(); ++u)
    if (pick(ex.plan(), ex.plan().units[u])) sum += t[u];
  return sum;
}

void BM_OverlapVsParts(benchmark::State& state) {
  auto& b = *backend();
  const auto p = model::load_program(model::resolve_workload("megatron_mlp"));
  const model::Bindings sizes{{"B", kB}, {"S", kS}, {"H", kH}};
  const auto all = model::enumerate_schedules(p);
  const auto* overlapped = overlapped_matmul(all);
  if (overlapped == nullptr) {
    state.SkipWithError("no ol(MM,...) schedule enumerated");
    return;
  }
  auto chunked = *overlapped;
  chunked.knobs.chunks = static_cast<int>(state.range(0));
  double parts = 0, ol = 0;
  for (auto _ : state) {
    {
      // The baseline's matmul and collective units, one after the other.
      exec::Executor base(b, exec::lower_for(b, all.front(), sizes));
      parts = time_of(base, b, [](const plan::StepPlan& p, const plan::Unit& u) {
        const plan::OpClass c = p.op(u.ops.front()).cls;
        return c == plan::OpClass::matmul || c == plan::OpClass::collective;
      });
    }
    exec::Executor ex(b, exec::lower_for(b, chunked, sizes));
    ol = time_of(ex, b, [](const plan::StepPlan&, const plan::Unit& u) { return u.overlapped; });
    state.SetIterationTime(ol * 1e-6);
  }
  state.counters["parts_us"] = parts;
  state.counters["overlapped_us"] = ol;
  state.counters["overlapped_over_parts"] = ol / parts;
  state.SetLabel(chunked.name() + " chunks=" + std::to_string(chunked.knobs.chunks));
}
BENCHMARK(BM_OverlapVsParts)->Arg(2)->Arg(4)->Arg(8)->Iterations(kIterations / 5)->UseManualTime()->Unit(benchmark::kMillisecond);

// Tiles against chunks (the knob overlap, model::Grain): megatron_mlp's
// overlapped unit of ol(MM,RS)-C-AG and of ol(MM,fuse(RS-C-AG)) at one
// size, in 4 chunks, both grains in the same run; the label says which
// schedule (argument 0: ol(MM,RS), 1: ol(MM,fuse(RS-C-AG))). Wide and short,
// so each chunk's own GEMM calls (2 per chunk on 2 ranks, one per slice) pay
// the widening of the whole f16 weight each, where the tile GEMM widens it
// once: the unit runs in about 0.2 s, an iteration (3 steps of each grain)
// in about a second.
constexpr std::int64_t kTileB = 1, kTileS = 512, kTileH = 2048;
constexpr int kTileChunks = 4;

void BM_TileVsChunk(benchmark::State& state) {
  auto& b = *backend();
  const auto p = model::load_program(model::resolve_workload("megatron_mlp"));
  const model::Bindings sizes{{"B", kTileB}, {"S", kTileS}, {"H", kTileH}};
  model::Schedule s = model::find_schedule(p, state.range(0) == 0 ? "ol(MM,RS)-C-AG" : "ol(MM,fuse(RS-C-AG))");
  s.knobs.chunks = kTileChunks;
  const auto overlapped = [](const plan::StepPlan&, const plan::Unit& u) { return u.overlapped; };
  double chunk = 0, tile = 0;
  for (auto _ : state) {
    s.knobs.overlap = model::Grain::chunk;
    {
      exec::Executor ex(b, exec::lower_for(b, s, sizes));
      chunk = time_of(ex, b, overlapped);
    }
    s.knobs.overlap = model::Grain::tile;
    exec::Executor ex(b, exec::lower_for(b, s, sizes));
    tile = time_of(ex, b, overlapped);
    state.SetIterationTime(tile * 1e-6);
  }
  state.counters["chunk_us"] = chunk;
  state.counters["tile_us"] = tile;
  state.counters["chunk_over_tile"] = chunk / tile;
  state.SetLabel(s.name() + " chunks=" + std::to_string(kTileChunks));
}
BENCHMARK(BM_TileVsChunk)->Arg(0)->Arg(1)->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);

// 2^24 parameters: 32 MiB of f16 gradient a rank, large against every cache.
constexpr std::int64_t kAdamN = 16777216;
constexpr int kFusedSteps = 5;

const model::Schedule& named(const std::vector<model::Schedule>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name() == name) return s;
  throw std::runtime_error("adam has no schedule " + name);
}

double step_median(exec::Executor& ex, exec::Backend& b, int steps) {
  double total = 0;
  for (double t : unit_times(ex, b, steps)) total += t;
  return total;
}

void BM_FusedVsParts(benchmark::State& state) {
  auto& b = *backend();
  const auto p = model::load_program(model::resolve_workload("adam"));
  const model::Bindings sizes{{"N", kAdamN}};
  const auto all = model::enumerate_schedules(p);
  exec::Executor fused(b, exec::lower_for(b, named(all, "fuse(RS-C-AG)+asSlice(m,v)"), sizes));
  exec::Executor parts(b, exec::lower_for(b, named(all, "RS-C-AG+asSlice(m,v)"), sizes));
  double f = 0, q = 0;
  for (auto _ : state) {
    f = step_median(fused, b, kFusedSteps);
    q = step_median(parts, b, kFusedSteps);
    state.SetIterationTime(f * 1e-6);
  }
  const double n = double(kAdamN);
  state.counters["fused_us"] = f;
  state.counters["parts_us"] = q;
  state.counters["parts_over_fused"] = q / f;
  state.counters["fused_B_per_param"] = double(fused.bytes_touched()) / n;
  state.counters["parts_B_per_param"] = double(parts.bytes_touched()) / n;
  state.SetLabel("adam N=2^24, 2 ranks: fuse(RS-C-AG)+asSlice(m,v) vs RS-C-AG+asSlice(m,v)");
}
BENCHMARK(BM_FusedVsParts)->Iterations(1)->Repetitions(5)->UseManualTime()->Unit(benchmark::kMillisecond);

// Median over `steps` of the slowest rank's time of `call` until its stream
// is drained, the ranks lined up by a barrier before each.
template <typename Call>
double collective_ms(exec::Backend& b, int steps, Call call) {
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    b.barrier();
    const double start = b.now_us();
    call();
    b.synchronize();
    std::vector<double> took{(b.now_us() - start) * 1e-3};
    b.host_allreduce(took, model::ReduceOp::max);
    t.push_back(took.front());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

constexpr int kCollectiveSteps = 5;

// Argument 0: out of place (the reduce-scatter's result in a buffer of its
// own, the allreduce's in another); 1: in place (this rank's own part, the
// input itself).
void BM_ReduceScatterVsAllreduce(benchmark::State& state) {
  auto& b = *backend();
  const bool in_place = state.range(0) == 1;
  const int p = b.ranks_per_group();
  const std::int64_t part = kAdamN / p;
  const exec::BufferId in = b.allocate(model::DType::f16, part * p);
  const exec::BufferId rs_out = in_place ? in : b.allocate(model::DType::f16, part);
  const exec::BufferId ar_out = in_place ? in : b.allocate(model::DType::f16, part * p);
  std::vector<exec::View> parts;
  for (int r = 0; r < p; ++r) parts.push_back({in, r * part, part});
  const exec::View own = in_place ? parts[static_cast<std::size_t>(b.position())] : exec::View{rs_out, 0, part};
  const auto rs = [&] { b.reduce_scatter(parts, own, model::ReduceOp::sum); };
  const auto ar = [&] { b.allreduce({in, 0, part * p}, {ar_out, 0, part * p}, model::ReduceOp::sum); };
  rs();  // first touches
  ar();
  double rs_ms = 0, ar_ms = 0;
  for (auto _ : state) {
    rs_ms = collective_ms(b, kCollectiveSteps, rs);
    ar_ms = collective_ms(b, kCollectiveSteps, ar);
    state.SetIterationTime(rs_ms * 1e-3);
  }
  b.release_all();
  state.counters["rs_ms"] = rs_ms;
  state.counters["ar_ms"] = ar_ms;
  state.counters["rs_over_ar"] = rs_ms / ar_ms;
  state.SetLabel(std::string("f16 N=2^24, ") + std::to_string(p) + " ranks, " +
                 (in_place ? "in place" : "out of place"));
}
BENCHMARK(BM_ReduceScatterVsAllreduce)->Arg(0)->Arg(1)->Iterations(1)->Repetitions(3)->UseManualTime()
    ->Unit(benchmark::kMillisecond);

class Silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  exec::ensure_mpi();
  benchmark::Initialize(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Silent silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  backend().reset();
  exec::finalize_mpi();
  return 0;
}
