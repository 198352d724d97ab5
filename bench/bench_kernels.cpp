// The cpu backend's element-wise engine (kernels/cpu_elementwise.h) on one
// core: a compiled program evaluated over 32768 contiguous elements (the
// size of cpu-local's element-wise work), reported as time per element.
// Programs: y = x * 2 in f16 (loads, one multiply, a rounded store), an f16
// axpy into f32, and Adam's three updates (f16 gradient, f32 state, five
// stores' worth of reads and writes, a square root and a division).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu_elementwise.h"
#include "kernels/elementwise_program.h"
#include "model/parse.h"

namespace {

using coconet::kernels::CpuOperand;
using coconet::kernels::ElementwiseStmt;
using coconet::model::DType;

constexpr std::int64_t kElems = 32768;

struct Case {
  std::vector<std::pair<std::string, std::string>> stmts;  // name, expression
  std::map<std::string, DType> inputs;
  DType out = DType::f32;
};

Case scale() { return {{{"y", "x * 2"}}, {{"x", DType::f16}}, DType::f16}; }
Case axpy() { return {{{"y", "w + 0.5 * g"}}, {{"w", DType::f32}, {"g", DType::f16}}, DType::f32}; }
Case adam() {
  return {{{"m1", "0.9 * m + 0.1 * g"},
           {"v1", "0.999 * v + 0.001 * g * g"},
           {"w1", "w - 0.001 * m1 / (sqrt(v1) + 0.00000001)"}},
          {{"g", DType::f16}, {"m", DType::f32}, {"v", DType::f32}, {"w", DType::f32}},
          DType::f32};
}

void run(benchmark::State& state, const Case& c) {
  std::vector<ElementwiseStmt> stmts;
  for (const auto& [name, text] : c.stmts) stmts.push_back({name, coconet::model::parse_expr(text), c.out});
  const auto program = coconet::kernels::compile_elementwise(stmts, c.inputs, {});
  std::vector<std::vector<std::byte>> buffers;
  std::vector<CpuOperand> ins, outs;
  const auto operand = [&](DType t) {
    buffers.emplace_back(static_cast<std::size_t>(kElems) * 4, std::byte{0x3c});  // f16 1.0-ish bit patterns
    return CpuOperand{buffers.back().data(), t, {0, kElems, 1}};
  };
  buffers.reserve(program.input_types.size() + program.output_types.size());
  for (DType t : program.input_types) ins.push_back(operand(t));
  for (DType t : program.output_types) outs.push_back(operand(t));
  const coconet::kernels::Block block{1, kElems, 0, 0, kElems};
  for (auto _ : state) {
    coconet::kernels::cpu_elementwise(program, ins, outs, block);
    benchmark::ClobberMemory();
  }
  state.counters["ns_per_elem"] = benchmark::Counter(
      static_cast<double>(kElems) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

Case one(const char* e) { return {{{"y", e}}, {{"x", DType::f32}, {"z", DType::f32}}, DType::f32}; }
void BM_Op(benchmark::State& s, const char* e) { run(s, one(e)); }
BENCHMARK_CAPTURE(BM_Op, add, "x + z");
BENCHMARK_CAPTURE(BM_Op, fma8, "x*z+x*z+x*z+x*z+x*z+x*z+x*z+x*z");
BENCHMARK_CAPTURE(BM_Op, div, "x / z");
BENCHMARK_CAPTURE(BM_Op, sqrt, "sqrt(x) + z");
BENCHMARK_CAPTURE(BM_Op, exp, "exp(x) + z");
BENCHMARK_CAPTURE(BM_Op, tanh, "tanh(x) + z");
BENCHMARK_CAPTURE(BM_Op, dropout, "dropout(x, 0.1) + z");
BENCHMARK_CAPTURE(BM_Op, pow, "pow(x, z)");
void BM_ScaleF16(benchmark::State& s) { run(s, scale()); }
void BM_AxpyF16F32(benchmark::State& s) { run(s, axpy()); }
void BM_AdamUpdate(benchmark::State& s) { run(s, adam()); }

}  // namespace

BENCHMARK(BM_ScaleF16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AxpyF16F32)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AdamUpdate)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
