// The host's fill rate of the run's inputs (elements/s, one core): every
// schedule of a run fills its inputs afresh, at BERT-large sizes hundreds of
// millions of elements per rank each time.
// - input_at: the per-element function (model/input_pattern.h) into a
//   block of doubles, as Backend::fill_input computed it before
//   model/input_fill.h (a division by the block's columns per element);
// - fill: model::fill_input_values row by row into a tile of f32 (a loop
//   the compiler vectorizes, input_fill.cpp), stored to the buffer's dtype
//   as the cpu backend's fill_input does (f16 local: a gradient; f32
//   replicated: a weight), as one row and as a vector (rows of one).
// Both give the same values (tests/unit/test_host_fill.cpp).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu_elementwise.h"
#include "model/input_fill.h"
#include "model/input_pattern.h"

namespace {

using coconet::model::DType;

// 4M elements: 8 MiB of f16, 16 MiB of f32, beyond this machine's caches.
constexpr std::int64_t kElems = std::int64_t{1} << 22;
// Values per store, as the cpu backend's fill_input (16 KiB of f32).
constexpr std::int64_t kTile = 4096;
// Backend::fill_input's block of doubles before input_fill.h (8 MiB).
constexpr std::int64_t kDoubleBlock = std::int64_t{1} << 20;

// One row of kElems, or (`vector`) kElems rows of one element: how a 1-D
// tensor (the optimizers' N) is laid out.
coconet::model::InputPattern pattern(bool local, bool vector = false) {
  coconet::model::InputPattern p;
  p.key = coconet::model::input_key(1, 0);
  p.local = local;
  p.rank = 1;
  p.cols = vector ? 1 : kElems;
  p.local_cols = p.cols;
  p.range = coconet::model::classic_input_range(local);
  return p;
}

void BM_InputAt(benchmark::State& state, bool local) {
  auto p = pattern(local);
  benchmark::DoNotOptimize(p);  // the range and columns unknown to the compiler, as in a run
  std::vector<double> values(static_cast<std::size_t>(kDoubleBlock));
  for (auto _ : state) {
    for (std::int64_t begin = 0; begin < kElems; begin += kDoubleBlock)
      for (std::int64_t i = 0; i < kDoubleBlock; ++i)
        values[static_cast<std::size_t>(i)] = coconet::model::input_at(p, begin + i);
    benchmark::DoNotOptimize(values.data());
  }
  state.SetItemsProcessed(state.iterations() * kElems);
}

void BM_Fill(benchmark::State& state, bool local, DType dtype, bool vector) {
  auto p = pattern(local, vector);
  benchmark::DoNotOptimize(p);
  std::vector<std::byte> buffer(static_cast<std::size_t>(kElems * coconet::model::bytes_of(dtype)));
  std::vector<float> tile(static_cast<std::size_t>(kTile));
  for (auto _ : state) {
    for (std::int64_t first = 0; first < kElems; first += kTile) {
      coconet::model::fill_input_values(p, first, std::span<float>(tile));
      coconet::kernels::store_f32(buffer.data(), dtype, first, 1, kTile, tile.data());
    }
    benchmark::DoNotOptimize(buffer.data());
  }
  state.SetItemsProcessed(state.iterations() * kElems);
}

BENCHMARK_CAPTURE(BM_InputAt, local, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_InputAt, replicated, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Fill, local_f16, true, DType::f16, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Fill, replicated_f32, false, DType::f32, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Fill, vector_local_f16, true, DType::f16, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Fill, vector_replicated_f32, false, DType::f32, true)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
