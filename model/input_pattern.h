// The deterministic inputs every run starts from, defined once for host and
// device (COCONET_HD): the reference interpreter, the executor's host fill
// and the cuda backend's fill kernel all compute an element's value with
// these functions, so a backend sees exactly the interpreter's inputs.
//
// Values are small integers (so every summation order gives the same sums):
// local tensors (gradients, partial products) in [-3, 3], different on every
// rank; replicated and sliced tensors (weights, moments) in [1, 4], one
// global value sliced across ranks, positive where a tensor feeds a sqrt.
// An element's value depends only on (seed, tensor, global index[, rank]).
#pragma once

#include <cstdint>

#include "model/host_device.h"
#include "model/ops.h"

namespace coconet::model {

inline constexpr std::int64_t kInputLocalMagnitude = 3;  // local tensors: [-3, 3]
inline constexpr std::int64_t kInputPositiveMax = 4;     // replicated/sliced tensors: [1, 4]

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
};

COCONET_HD std::uint64_t input_key(std::uint64_t seed, int decl_index) {
  return mix64(mix64(seed) ^ static_cast<std::uint64_t>(decl_index));
}

// The value of global element `global_index` of the tensor keyed `key`.
COCONET_HD double input_element(std::uint64_t key, bool local, int rank, std::int64_t global_index) {
  std::uint64_t h = mix64(key ^ static_cast<std::uint64_t>(global_index));
  if (local) {
    h = mix64(h ^ static_cast<std::uint64_t>(rank + 1));
    return static_cast<double>(static_cast<std::int64_t>(h % (2 * kInputLocalMagnitude + 1)) -
                               kInputLocalMagnitude);
  }
  return static_cast<double>(1 + static_cast<std::int64_t>(h % kInputPositiveMax));
}

// The value of the block's element `i` (row-major within the block).
COCONET_HD double input_at(const InputPattern& p, std::int64_t i) {
  const std::int64_t r = i / p.local_cols, c = i - r * p.local_cols;
  return input_element(p.key, p.local, p.rank, (p.row_begin + r) * p.cols + p.col_begin + c);
}

}  // namespace coconet::model
