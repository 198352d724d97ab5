// GPU benchmarks of coconet's kernels (Google Benchmark, device-event timing):
// - the device's copy bandwidth (cudaMemcpy D2D and a 16-byte-vector copy
//   kernel), the yardstick of the bandwidth-bound kernels;
// - fused Adam / LAMB vs the unfused Adam (one kernel per statement), each
//   reporting the bytes it must move per second (counter "bytes_per_second");
// - the generic element-wise kernel (kc::elementwise) running Adam's program
//   as compile_elementwise makes it from workloads/adam.yaml, against the
//   hand-written kc::adam_step: the same 26 bytes per element;
// - one GEMM vs the same GEMM in 2/4/8 row chunks at the paper's Megatron
//   shapes (GPT-2 8.3B on 8 GPUs: B*S = 8192 rows, H = 3072), and the
//   project's tiled GEMM of overlap: tile (kernels/cuda/tile_gemm.h) at the
//   same shape, 8 blocks, flags published (its efficiency against cuBLAS);
// - the fused RS+Adam+AG on one rank, LSA kernel vs host-API fallback, and
//   the generated single LSA kernel on Adam's compiled program against the
//   hand-written LSA kernel (the same operands and bytes).
// Without a GPU it prints why and exits 0 (nothing to measure).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_gpu_programs.h"
#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/host_convert.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/fused_allreduce.h"
#include "kernels/cuda/fused_program_lsa.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/grid.h"
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/tile_gemm.h"

namespace kc = coconet::kernels::cuda;
using coconet::model::DType;

namespace {

// Shard sizes: 64M elements (the issue's bar for the 90% goal) and 16M.
constexpr std::int64_t kLargeShard = std::int64_t{1} << 26;
constexpr std::int64_t kSmallShard = std::int64_t{1} << 24;
// Megatron-LM GPT-2 8.3B on 8 GPUs (CoCoNet paper, section 6): B=8, S=1024, H=3072.
constexpr std::int64_t kRows = 8 * 1024;
constexpr std::int64_t kHidden = 3072;
constexpr std::int64_t kRanks = 8;

// Owned device memory.
struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(std::size_t bytes) {
    COCONET_CUDA_CHECK(cudaMalloc(&p, bytes));
    COCONET_CUDA_CHECK(cudaMemset(p, 0, bytes));
  }
  ~DeviceMem() { (void)cudaFree(p); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
};

// Times `launch` with device events per iteration; reports bytes/s from `bytes`.
void time_with_events(benchmark::State& state, double bytes, const std::function<void()>& launch) {
  cudaEvent_t start, stop;
  COCONET_CUDA_CHECK(cudaEventCreate(&start));
  COCONET_CUDA_CHECK(cudaEventCreate(&stop));
  launch();  // warm-up
  for (auto _ : state) {
    COCONET_CUDA_CHECK(cudaEventRecord(start));
    launch();
    COCONET_CUDA_CHECK(cudaEventRecord(stop));
    COCONET_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    COCONET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms / 1e3);
  }
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
}

__global__ void copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = in[i];
}

void BM_CopyMemcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) * sizeof(float);
  DeviceMem a(bytes), b(bytes);
  time_with_events(state, 2.0 * static_cast<double>(bytes),
                   [&] { COCONET_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice)); });
}

void BM_CopyKernel(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) * sizeof(float);
  const auto vecs = static_cast<std::int64_t>(bytes / sizeof(uint4));
  DeviceMem a(bytes), b(bytes);
  time_with_events(state, 2.0 * static_cast<double>(bytes), [&] {
    copy_kernel<<<kc::blocks_for(vecs, kc::kBlockThreads), kc::kBlockThreads>>>(
        static_cast<const uint4*>(a.p), static_cast<uint4*>(b.p), vecs);
  });
}

// Inputs generated on the device (kernels/cuda/fill.h), f16: one 2-byte store
// per element. The goal: a 1 G-element workload's inputs ready in seconds
// (the host loop it replaced took about 40 ns per element).
void BM_FillInput(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  DeviceMem a(static_cast<std::size_t>(n) * 2);
  coconet::model::InputPattern pattern;
  pattern.key = coconet::model::input_key(1, 0);
  pattern.cols = pattern.local_cols = n;
  time_with_events(state, 2.0 * static_cast<double>(n),
                   [&] { kc::fill_input({a.p, n, DType::f16}, pattern, nullptr); });
  state.SetItemsProcessed(state.iterations() * n);
}

// f16 gradient, f32 w, m, v: the workloads' mixed precision.
struct Shard {
  DeviceMem g, w, m, v;
  std::int64_t n;
  explicit Shard(std::int64_t n_)
      : g(n_ * 2), w(n_ * 4), m(n_ * 4), v(n_ * 4), n(n_) {}
  [[nodiscard]] kc::OptimizerShard view() const {
    return {{g.p, n, DType::f16}, {w.p, n, DType::f32}, {m.p, n, DType::f32}, {v.p, n, DType::f32}};
  }
};

// Bytes Adam must move: read g (2) + w, m, v (12), write w, m, v (12).
constexpr double kAdamBytesPerElement = 26.0;
// LAMB: phase 1 reads g, w, m, v (14) and writes m, v (8); phase 2 reads w, m, v (12), writes w (4).
constexpr double kLambBytesPerElement = 38.0;

void BM_AdamFused(benchmark::State& state) {
  Shard s(state.range(0));
  time_with_events(state, kAdamBytesPerElement * static_cast<double>(s.n),
                   [&] { kc::adam_step(s.view(), kc::AdamHyper{}, nullptr); });
}

void BM_AdamUnfused(benchmark::State& state) {
  Shard s(state.range(0));
  time_with_events(state, kAdamBytesPerElement * static_cast<double>(s.n),
                   [&] { kc::adam_step_unfused(s.view(), kc::AdamHyper{}, nullptr); });
}

// The generic kernel on Adam's generated program: reads g1 (f16), m, v, w
// (f32), writes m1, v1, w1 into their own buffers (a program's outputs never
// alias its inputs): the bytes of the fused kernel, 26 per element.
void BM_AdamGeneric(benchmark::State& state) {
  const coconet::model::ElementwiseProgram program = coconet::bench::adam_program();
  const std::int64_t n = state.range(0);
  Shard s(n);
  DeviceMem m1(n * 4), v1(n * 4), w1(n * 4);
  const coconet::model::Access flat{0, n, 1};
  const coconet::model::Block block{1, n, 0, 0, n};
  std::vector<kc::ElementwiseOperand> ins, outs;
  for (const auto& name : program.input_names) {
    void* data = name == "g1" ? s.g.p : name == "m" ? s.m.p : name == "v" ? s.v.p : name == "w" ? s.w.p : nullptr;
    if (data == nullptr) {
      state.SkipWithError(("adam program reads an unexpected tensor " + name).c_str());
      return;
    }
    ins.push_back({data, name == "g1" ? DType::f16 : DType::f32, flat});
  }
  for (const auto& name : program.output_names)
    outs.push_back({name == "m1" ? m1.p : name == "v1" ? v1.p : w1.p, DType::f32, flat});
  time_with_events(state, kAdamBytesPerElement * static_cast<double>(n),
                   [&] { kc::elementwise(program, ins, outs, block, nullptr); });
}

void BM_LambFused(benchmark::State& state) {
  Shard s(state.range(0));
  DeviceMem ws(kc::lamb_workspace_bytes());
  time_with_events(state, kLambBytesPerElement * static_cast<double>(s.n), [&] {
    kc::lamb_step(s.view(), kc::LambHyper{}, static_cast<double*>(ws.p), nullptr);
  });
}

// The MLP's second GEMM on one of 8 ranks: [B*S, 4H/8] x [4H/8, H], f16.
void BM_MegatronGemm(benchmark::State& state) {
  const int chunks = static_cast<int>(state.range(0));
  const std::int64_t m = kRows, k = 4 * kHidden / kRanks, n = kHidden;
  DeviceMem a(m * k * 2), b(k * n * 2), c(m * n * 2);
  kc::Blas blas;
  cudaStream_t comm;
  COCONET_CUDA_CHECK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(chunks));
  for (auto& e : events) COCONET_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const kc::GemmArgs g{a.p, b.p, c.p, DType::f16, DType::f16, m, n, k, k, n, n};
  const auto plan = kc::chunk_rows(m, chunks);
  time_with_events(state, 2.0 * (m * k + k * n + m * n), [&] {
    kc::chunked_gemm(blas, g, plan, nullptr, comm, events, nullptr);
  });
  state.counters["flops"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
  for (auto& e : events) (void)cudaEventDestroy(e);
  (void)cudaStreamDestroy(comm);
}

// overlap: tile's GEMM at BM_MegatronGemm's shape: the rows in 8 blocks (one
// per rank's slice, as an 8-rank ring would take them), each block's flag
// raised; no window copy (one rank reads none), no communication kernel.
void BM_TileGemm(benchmark::State& state) {
  const std::int64_t m = kRows, k = 4 * kHidden / kRanks, n = kHidden;
  DeviceMem a(m * k * 2), b(k * n * 2), c(m * n * 2), flags(sizeof(unsigned) * kc::kTileFlagWords);
  std::vector<std::vector<kc::TileRows>> blocks;
  for (std::int64_t r = 0; r < kRanks; ++r) {
    const kc::Span1d rows = kc::shard_of(m, static_cast<int>(kRanks), static_cast<int>(r));
    blocks.push_back({{rows.begin * k, rows.begin * n, rows.size}});
  }
  const kc::TileGemmPlan plan = kc::plan_tile_gemm(blocks, n);
  const kc::TileGemmArgs g{a.p, b.p, c.p, nullptr, DType::f16, DType::f16, n, k, k, n, n};
  auto* f = static_cast<unsigned*>(flags.p);
  time_with_events(state, 2.0 * (m * k + k * n + m * n), [&] {
    kc::reset_tile_flags(f, nullptr);
    kc::tile_gemm(g, plan, f, nullptr);
  });
  state.counters["flops"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

// One-rank communicator for the fused collective.
ncclComm_t one_rank_comm() {
  int device = 0;
  COCONET_CUDA_CHECK(cudaGetDevice(&device));
  ncclComm_t c = nullptr;
  COCONET_NCCL_CHECK(ncclCommInitAll(&c, 1, &device));
  return c;
}

void BM_FusedAdamHost(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ncclComm_t comm = one_rank_comm();
  {
    Shard s(n);
    DeviceMem scratch(n * 2);
    const kc::OptimizerShard v = s.view();
    time_with_events(state, kAdamBytesPerElement * static_cast<double>(n), [&] {
      kc::fused_adam_host(comm, 0, 1, {v.g, v.w, v.m, v.v, kc::AdamHyper{}},
                          {scratch.p, n, DType::f16}, nullptr);
    });
  }
  (void)ncclCommDestroy(comm);
}

// Runs `body(lsa, g, w, m, v)` on a one-rank LSA communicator with Adam's
// operands: the f16 gradient and f32 weights in symmetric windows, m and v in
// plain device memory; skips, saying why, where the LSA path is unavailable.
template <typename Body>
void with_lsa_adam_operands(benchmark::State& state, Body body) {
  const std::int64_t n = state.range(0);
  ncclComm_t comm = one_rank_comm();
  {
    std::string why;
    auto lsa = kc::make_lsa_comm(comm, why);
    if (!lsa) {
      state.SkipWithError(("LSA path unavailable: " + why).c_str());
    } else {
      kc::SymmetricBuffer g(comm, DType::f16, n), w(comm, DType::f32, n);
      DeviceMem m(n * 4), v(n * 4);
      body(*lsa, g, w, m, v);
    }
  }
  (void)ncclCommDestroy(comm);
}

void BM_FusedAdamLsa(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  with_lsa_adam_operands(state, [&](const kc::LsaComm& lsa, kc::SymmetricBuffer& g, kc::SymmetricBuffer& w,
                                    DeviceMem& m, DeviceMem& v) {
    time_with_events(state, kAdamBytesPerElement * static_cast<double>(n), [&] {
      kc::fused_adam_lsa(lsa, g, w, {g.view(), w.view(), {m.p, n, DType::f32}, {v.p, n, DType::f32}, kc::AdamHyper{}},
                         nullptr);
    });
  });
}

// The generated single kernel (fused_program_lsa.h) on Adam's compiled
// program, with the hand-written kernel's operands: g1 reduced from the f16
// gradient window, m and v updated in place, w read from its window and w1
// stored into it (in place, as BM_FusedAdamLsa): the same 26 bytes per element.
void BM_FusedGenericLsa(benchmark::State& state) {
  const coconet::model::ElementwiseProgram program = coconet::bench::adam_program();
  const std::int64_t n = state.range(0);
  with_lsa_adam_operands(state, [&](const kc::LsaComm& lsa, kc::SymmetricBuffer& g, kc::SymmetricBuffer& w,
                                    DeviceMem& m, DeviceMem& v) {
    std::vector<kc::LsaOperand> ins, outs;
    for (const auto& name : program.input_names) {
      if (name == "g1") ins.push_back({kc::LsaRole::reduced, &g, nullptr});
      else ins.push_back({kc::LsaRole::local, nullptr, name == "m" ? m.p : name == "v" ? v.p : w.view().data});
    }
    for (const auto& name : program.output_names) {
      if (name == "w1") outs.push_back({kc::LsaRole::gathered, &w, nullptr});
      else outs.push_back({kc::LsaRole::local, nullptr, name == "m1" ? m.p : v.p});
    }
    time_with_events(state, kAdamBytesPerElement * static_cast<double>(n),
                     [&] { kc::fused_program_lsa(lsa, program, ins, outs, n, nullptr); });
  });
}

// Host side, no GPU needed: encoding host values as f16 for an upload
// (exec/cuda/host_convert.h), per element. The dry run of gpu-check.sh runs
// it with the real run's exact flags, so a flag this Google Benchmark does
// not take is seen before the GPU window.
void BM_HostEncodeF16(benchmark::State& state) {
  const std::vector<double> values(static_cast<std::size_t>(state.range(0)), 1.5);
  for (auto _ : state) benchmark::DoNotOptimize(coconet::exec::cuda::encode(values, DType::f16));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void register_host() {
  benchmark::RegisterBenchmark("BM_HostEncodeF16", BM_HostEncodeF16)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
}

void register_all() {
  for (const auto* name : {"BM_CopyMemcpy", "BM_CopyKernel"}) {
    auto* b = benchmark::RegisterBenchmark(name, std::string(name) == "BM_CopyMemcpy" ? BM_CopyMemcpy : BM_CopyKernel);
    b->Arg(kSmallShard)->Arg(kLargeShard)->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
  for (auto [name, fn] : {std::pair{"BM_AdamFused", &BM_AdamFused}, std::pair{"BM_AdamUnfused", &BM_AdamUnfused},
                          std::pair{"BM_AdamGeneric", &BM_AdamGeneric},
                          std::pair{"BM_LambFused", &BM_LambFused}, std::pair{"BM_FusedAdamHost", &BM_FusedAdamHost},
                          std::pair{"BM_FusedAdamLsa", &BM_FusedAdamLsa},
                          std::pair{"BM_FusedGenericLsa", &BM_FusedGenericLsa}})
    benchmark::RegisterBenchmark(name, fn)->Arg(kSmallShard)->Arg(kLargeShard)->UseManualTime()->Unit(
        benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_FillInput", BM_FillInput)
      ->Arg(kLargeShard)->Arg(std::int64_t{1} << 30)->UseManualTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_MegatronGemm", BM_MegatronGemm)
      ->ArgName("chunks")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseManualTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_TileGemm", BM_TileGemm)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // A flag this Google Benchmark does not know is an error, not a silent
  // default (1.7's --benchmark_min_time takes seconds without the `s`).
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  register_host();
  const auto a = coconet::exec::cuda::probe();
  if (!a.ok)
    std::printf("bench_gpu: no GPU (%s): the host benchmarks only\n", a.reason.c_str());
  else
    register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
