// Benchmark of the front end on long programs (issue 14): parsing and checking
// a workload of 1k, 10k and 100k chained statements must take time linear in
// the program's size. Google Benchmark fits the slope (BigO, RMS):
//   ./build/bench/coconet_bench_parse
#include <benchmark/benchmark.h>

#include <string>

#include "model/parse.h"

namespace {

using namespace coconet;

// A chain: y1 = w * 0.5 + w, y2 = y1 * 0.5 + w, ..., each statement reading the previous one.
std::string chained_program(std::int64_t statements) {
  std::string yaml =
      "name: chain\nparams: {N: 1024}\ntensors:\n  w: {dtype: f32, shape: [N], layout: "
      "replicated}\nprogram:\n";
  yaml.reserve(static_cast<std::size_t>(statements) * 32);
  yaml += "  - y1 = w * 0.5 + w\n";
  for (std::int64_t i = 2; i <= statements; ++i)
    yaml += "  - y" + std::to_string(i) + " = y" + std::to_string(i - 1) + " * 0.5 + w\n";
  return yaml + "outputs: [y" + std::to_string(statements) + "]\n";
}

void BM_ParseStatements(benchmark::State& state) {
  const std::string text = chained_program(state.range(0));
  for (auto _ : state) {
    const model::Program p = model::parse_program(text, "chain.yaml");
    benchmark::DoNotOptimize(p.stmts.data());
  }
  state.SetComplexityN(state.range(0));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_ParseStatements)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oN);

}  // namespace

BENCHMARK_MAIN();
