// The cpu backend's kernels on one core against this machine's limits,
// measured in the same run (bench/cpu_limits.h):
// - element-wise programs (kernels/cpu_elementwise.h) over 16M elements,
//   memory-bound ones as GB/s and as a share of STREAM's triad bandwidth
//   (`of_triad`): the triad itself as a program, a scaling in f32, f16 and
//   bf16, an f16 axpy into f32, and Adam's three fused updates;
// - compute-bound operators over 32768 elements (in cache) as ns an element;
// - matmul (kernels/cpu_matmul.h) in f32, f16 and bf16 at a shape of
//   megatron_mlp's first GEMM on 2 ranks (B*S rows cut to 256 to keep an
//   iteration short), as GFLOP/s and as a share of Eigen's GEMM built for
//   this CPU (`of_eigen`); also the GEMM's baseline level, for comparison.
// Each iteration runs the kernel and then the limit's own pass (a triad, an
// Eigen product), each timed alone: the ratio compares the two under the
// same load of this shared machine. Bytes count each element read or written
// once (STREAM's convention).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "bench/cpu_limits.h"
#include "kernels/cpu_elementwise.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_matmul.h"
#include "model/elementwise_program.h"
#include "model/half.h"
#include "model/parse.h"

namespace {

using coconet::kernels::CpuOperand;
using coconet::model::ElementwiseStmt;
using coconet::model::DType;

// The size for memory-bound programs: 16M elements, 64 MiB an f32
// operand, far beyond any cache of this machine.
constexpr std::int64_t kStreamElems = std::int64_t{1} << 24;
// Compute-bound operators: 32768 elements (cpu-local's element-wise work), in cache.
constexpr std::int64_t kCacheElems = 32768;

// megatron_mlp's first GEMM per rank at H=3072 on 2 ranks is
// [B*S, H] x [H, 4H/2] = [2048, 3072] x [3072, 6144]; rows and columns cut
// to [256, 3072] x [3072, 3072] (4.8 GFLOP) so an iteration stays short.
constexpr std::int64_t kGemmM = 256, kGemmK = 3072, kGemmN = 3072;

struct Case {
  std::vector<std::pair<std::string, std::string>> stmts;  // name, expression
  std::map<std::string, DType> inputs;
  DType out = DType::f32;
};

std::size_t element_bytes(DType t) { return static_cast<std::size_t>(coconet::model::bytes_of(t)); }

// Fills a buffer with finite values of its type (1.5 in f32, f16 or bf16).
std::vector<std::byte> filled(DType t, std::int64_t n) {
  std::vector<std::byte> buf(static_cast<std::size_t>(n) * element_bytes(t));
  if (t == DType::f32) {
    auto* p = reinterpret_cast<float*>(buf.data());
    std::fill(p, p + n, 1.5f);
  } else {
    const std::uint16_t h = t == DType::f16 ? coconet::model::float_to_f16(1.5f) : coconet::model::float_to_bf16(1.5f);
    auto* p = reinterpret_cast<std::uint16_t*>(buf.data());
    std::fill(p, p + n, h);
  }
  return buf;
}

struct Prepared {
  coconet::model::ElementwiseProgram program;
  std::vector<std::vector<std::byte>> buffers;
  std::vector<CpuOperand> ins, outs;
  double bytes_per_element = 0;
};

Prepared prepare(const Case& c, std::int64_t n) {
  std::vector<ElementwiseStmt> stmts;
  for (const auto& [name, text] : c.stmts) stmts.push_back({name, coconet::model::parse_expr(text), c.out});
  Prepared p{coconet::model::compile_elementwise(stmts, c.inputs, {}), {}, {}, {}, 0};
  const auto add = [&](DType t, std::vector<CpuOperand>& to) {
    p.buffers.push_back(filled(t, n));
    to.push_back(CpuOperand{p.buffers.back().data(), t, {0, n, 1}});
    p.bytes_per_element += static_cast<double>(element_bytes(t));
  };
  p.buffers.reserve(p.program.input_types.size() + p.program.output_types.size());
  for (DType t : p.program.input_types) add(t, p.ins);
  for (DType t : p.program.output_types) add(t, p.outs);
  return p;
}

// Seconds the kernel and its limit took over the benchmark loop (thread CPU time).
struct Paired {
  double kernel = 0;
  double limit = 0;
};

template <typename Kernel, typename Limit>
Paired run_paired(benchmark::State& state, Kernel&& kernel, Limit&& limit) {
  kernel();  // warm-up: pages touched, code hot, for both
  (void)limit();
  Paired t;
  for (auto _ : state) {
    const double start = coconet::bench::thread_seconds();
    kernel();
    benchmark::ClobberMemory();
    t.kernel += coconet::bench::thread_seconds() - start;
    t.limit += limit();
  }
  return t;
}

void BM_Stream(benchmark::State& state, const Case& c) {
  Prepared p = prepare(c, kStreamElems);
  const coconet::model::Block block{1, kStreamElems, 0, 0, kStreamElems};
  const Paired t = run_paired(
      state, [&] { coconet::kernels::cpu_elementwise(p.program, p.ins, p.outs, block); },
      [] { return coconet::bench::triad_pass_seconds(kStreamElems); });
  const double passes = static_cast<double>(kStreamElems * state.iterations());
  const double gbps = p.bytes_per_element * passes / t.kernel / 1e9;
  const double limit = coconet::bench::kTriadBytesPerElement * passes / t.limit / 1e9;
  state.counters["GB/s"] = gbps;
  state.counters["triad_GB/s"] = limit;
  state.counters["of_triad"] = gbps / limit;
}

void BM_StreamTriadReference(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(kStreamElems);
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  coconet::bench::triad(a.data(), b.data(), c.data(), 3.0f, kStreamElems);
  const double start = coconet::bench::thread_seconds();
  for (auto _ : state) {
    coconet::bench::triad(a.data(), b.data(), c.data(), 3.0f, kStreamElems);
    benchmark::ClobberMemory();
  }
  const double seconds = coconet::bench::thread_seconds() - start;
  state.counters["GB/s"] = coconet::bench::kTriadBytesPerElement * static_cast<double>(kStreamElems) *
                           static_cast<double>(state.iterations()) / seconds / 1e9;
}

Case f32_triad() { return {{{"a", "b + 3 * c"}}, {{"b", DType::f32}, {"c", DType::f32}}, DType::f32}; }
Case scale(DType t) { return {{{"y", "x * 2"}}, {{"x", t}}, t}; }
Case axpy() { return {{{"y", "w + 0.5 * g"}}, {{"w", DType::f32}, {"g", DType::f16}}, DType::f32}; }
Case adam() {
  return {{{"m1", "0.9 * m + 0.1 * g"},
           {"v1", "0.999 * v + 0.001 * g * g"},
           {"w1", "w - 0.001 * m1 / (sqrt(v1) + 0.00000001)"}},
          {{"g", DType::f16}, {"m", DType::f32}, {"v", DType::f32}, {"w", DType::f32}},
          DType::f32};
}

void BM_InCache(benchmark::State& state, const char* expr) {
  Prepared p = prepare({{{"y", expr}}, {{"x", DType::f32}, {"z", DType::f32}}, DType::f32}, kCacheElems);
  const coconet::model::Block block{1, kCacheElems, 0, 0, kCacheElems};
  for (auto _ : state) {
    coconet::kernels::cpu_elementwise(p.program, p.ins, p.outs, block);
    benchmark::ClobberMemory();
  }
  state.counters["ns/elem"] = benchmark::Counter(static_cast<double>(kCacheElems * state.iterations()),
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Small integers (exact in every dtype), as verification's inputs are.
std::vector<std::byte> gemm_operand(DType t, std::int64_t n) {
  std::vector<float> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  std::vector<std::byte> buf(static_cast<std::size_t>(n) * element_bytes(t));
  coconet::kernels::store_f32(buf.data(), t, 0, 1, n, values.data());
  return buf;
}

double gemm_flops() { return 2.0 * static_cast<double>(kGemmM * kGemmN * kGemmK); }

void report_gemm(benchmark::State& state, const Paired& t) {
  const double flops = gemm_flops() * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = flops / t.kernel / 1e9;
  state.counters["eigen_GFLOP/s"] = flops / t.limit / 1e9;
  state.counters["of_eigen"] = t.limit / t.kernel;
}

double eigen_product() { return coconet::bench::reference_gemm_seconds(kGemmM, kGemmN, kGemmK); }

void BM_Matmul(benchmark::State& state, DType t) {
  auto a = gemm_operand(t, kGemmM * kGemmK), b = gemm_operand(t, kGemmK * kGemmN);
  std::vector<std::byte> out(static_cast<std::size_t>(kGemmM * kGemmN) * element_bytes(t));
  const coconet::kernels::CpuMatrix ma{a.data(), t, 0, kGemmM, kGemmK, kGemmK};
  const coconet::kernels::CpuMatrix mb{b.data(), t, 0, kGemmK, kGemmN, kGemmN};
  const coconet::kernels::CpuMatrix mo{out.data(), t, 0, kGemmM, kGemmN, kGemmN};
  report_gemm(state, run_paired(state, [&] { coconet::kernels::cpu_matmul(ma, mb, mo); }, eigen_product));
  state.SetLabel(coconet::kernels::gemm_level_name(coconet::kernels::gemm_level()));
}

void BM_GemmLevel(benchmark::State& state, coconet::kernels::GemmLevel level) {
  std::vector<float> a(static_cast<std::size_t>(kGemmM * kGemmK), 1.0f), b(static_cast<std::size_t>(kGemmK * kGemmN), 1.0f);
  std::vector<float> c(static_cast<std::size_t>(kGemmM * kGemmN));
  const coconet::kernels::GemmF32 g{a.data(), kGemmK, b.data(), kGemmN, c.data(), kGemmN, kGemmM, kGemmN, kGemmK};
  report_gemm(state, run_paired(state, [&] { coconet::kernels::gemm_f32(g, level); }, eigen_product));
  state.SetLabel(coconet::kernels::gemm_level_name(level));
}

void BM_EigenReference(benchmark::State& state) {
  std::vector<float> a(static_cast<std::size_t>(kGemmM * kGemmK), 1.0f), b(static_cast<std::size_t>(kGemmK * kGemmN), 1.0f);
  std::vector<float> c(static_cast<std::size_t>(kGemmM * kGemmN));
  coconet::bench::reference_gemm(a.data(), b.data(), c.data(), kGemmM, kGemmN, kGemmK);
  const double start = coconet::bench::thread_seconds();
  for (auto _ : state) {
    coconet::bench::reference_gemm(a.data(), b.data(), c.data(), kGemmM, kGemmN, kGemmK);
    benchmark::ClobberMemory();
  }
  const double seconds = coconet::bench::thread_seconds() - start;
  state.counters["GFLOP/s"] = gemm_flops() * static_cast<double>(state.iterations()) / seconds / 1e9;
  state.SetLabel(coconet::bench::reference_build());
}

}  // namespace

BENCHMARK(BM_StreamTriadReference)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Stream, triad_f32, f32_triad())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Stream, scale_f32, scale(DType::f32))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Stream, scale_f16, scale(DType::f16))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Stream, scale_bf16, scale(DType::bf16))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Stream, axpy_f16_f32, axpy())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Stream, adam_f16_f32, adam())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_InCache, add, "x + z");
BENCHMARK_CAPTURE(BM_InCache, fma8, "x*z+x*z+x*z+x*z+x*z+x*z+x*z+x*z");
BENCHMARK_CAPTURE(BM_InCache, div, "x / z");
BENCHMARK_CAPTURE(BM_InCache, sqrt, "sqrt(x) + z");
BENCHMARK_CAPTURE(BM_InCache, exp, "exp(x) + z");
BENCHMARK_CAPTURE(BM_InCache, tanh, "tanh(x) + z");
BENCHMARK_CAPTURE(BM_InCache, gelu, "gelu(x) + z");
BENCHMARK_CAPTURE(BM_InCache, dropout, "dropout(x, 0.1) + z");
BENCHMARK_CAPTURE(BM_InCache, pow, "pow(x, z)");
BENCHMARK(BM_EigenReference)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, f32, DType::f32)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, f16, DType::f16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Matmul, bf16, DType::bf16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GemmLevel, baseline_f32, coconet::kernels::GemmLevel::baseline)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
