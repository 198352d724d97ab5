// The deterministic inputs every run starts from, defined once for host and
// device (COCONET_HD): the reference interpreter, the executor's host fill
// and the cuda backend's fill kernel all compute an element's value with
// these functions, so a backend sees exactly the interpreter's inputs.
//
// Values are small integers times a power of two (so every summation order
// gives the same sums while they fit in the f32 mantissa), drawn uniformly
// from each input's InputRange. Local tensors (gradients, partial products)
// differ on every rank; replicated and sliced tensors (weights, moments) are
// one global value sliced across ranks. The classic ranges, [-3, 3] for local
// tensors and [1, 4] for the others, serve every program whose values they
// keep in range; model/input_ranges.h chooses narrower, signed or scaled
// ranges where a program's sums would overflow its types with them.
// An element's value depends only on (seed, tensor, global index[, rank],
// range).
#pragma once

#include <cstdint>

#include "model/host_device.h"
#include "model/ops.h"

namespace coconet::model {

inline constexpr std::int64_t kInputLocalMagnitude = 3;  // classic local tensors: [-3, 3]
inline constexpr std::int64_t kInputPositiveMax = 4;     // classic replicated/sliced tensors: [1, 4]

// The integers [lo, hi] an input's elements are drawn from, each multiplied
// by 2^-shift (a power of two: the scaled values are exact in every dtype
// while the integers fit its mantissa and the scale its exponent).
struct InputRange {
  std::int64_t lo = 1;
  std::int64_t hi = kInputPositiveMax;
  int shift = 0;
  friend bool operator==(const InputRange&, const InputRange&) = default;
};

// The classic range of a local (per-rank) or a global (replicated, sliced) input.
COCONET_HD InputRange classic_input_range(bool local) {
  return local ? InputRange{-kInputLocalMagnitude, kInputLocalMagnitude, 0} : InputRange{1, kInputPositiveMax, 0};
}

// How a rank's block of a tensor fills: the value stream (seed and tensor),
// whether the tensor is local (per-rank values), and where the block sits in
// the global [rows x cols] matrix (row-major, local_cols columns from col_begin).
struct InputPattern {
  std::uint64_t key = 0;  // input_key(seed, decl_index)
  bool local = false;
  int rank = 0;           // world rank: local tensors differ per rank
  std::int64_t row_begin = 0;
  std::int64_t col_begin = 0;
  std::int64_t cols = 1;        // global columns
  std::int64_t local_cols = 1;  // the block's columns
  InputRange range = classic_input_range(false);
};

COCONET_HD std::uint64_t input_key(std::uint64_t seed, int decl_index) {
  return mix64(mix64(seed) ^ static_cast<std::uint64_t>(decl_index));
}

// The value of global element `global_index` of the tensor keyed `key`, drawn from `range`.
COCONET_HD double input_element(std::uint64_t key, bool local, int rank, std::int64_t global_index,
                                const InputRange& range) {
  std::uint64_t h = mix64(key ^ static_cast<std::uint64_t>(global_index));
  if (local) h = mix64(h ^ static_cast<std::uint64_t>(rank + 1));
  const auto span = static_cast<std::uint64_t>(range.hi - range.lo + 1);
  const auto v = static_cast<double>(range.lo + static_cast<std::int64_t>(h % span));
  return v / static_cast<double>(std::int64_t{1} << range.shift);
}

// The same in the classic range of the tensor's kind.
COCONET_HD double input_element(std::uint64_t key, bool local, int rank, std::int64_t global_index) {
  return input_element(key, local, rank, global_index, classic_input_range(local));
}

// The value of the block's element `i` (row-major within the block).
COCONET_HD double input_at(const InputPattern& p, std::int64_t i) {
  const std::int64_t r = i / p.local_cols, c = i - r * p.local_cols;
  return input_element(p.key, p.local, p.rank, (p.row_begin + r) * p.cols + p.col_begin + c, p.range);
}

}  // namespace coconet::model
