// The host's fast fill of an input block: element for element the values of
// model::input_at (input_pattern.h), computed row by row. input_at divides
// the block index by the block's columns and takes a 64-bit remainder by the
// range's span for every element; at BERT-large sizes (hundreds of millions
// of elements per tensor, every schedule filling its inputs afresh) those
// divisions were most of a run's host time. Here a row's global index is
// carried from element to element, and the remainder is computed by
// multiplication (Remainder64). The value stream is input_at's, unchanged:
// tests/unit/test_input_fill.cpp holds the two equal.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "model/input_pattern.h"

namespace coconet::model {

// x % d for a fixed divisor d > 0, by multiplication: with
// m = ceil(2^128 / d) (mod 2^128), the low 128 bits of m * x are x/d's
// fractional part scaled by 2^128, and that part times d, over 2^128 and
// floored, is x % d. Exact for every 64-bit x and d (Lemire, Kaser and Kurz,
// "Faster Remainder by Direct Computation", Software: Practice and
// Experience 49(6), 2019, theorem 1 with 128 fractional bits for 64-bit
// operands).
class Remainder64 {
 public:
  explicit Remainder64(std::uint64_t d) : d_(d), m_(~Wide{0} / d + 1) {}

  [[nodiscard]] std::uint64_t operator()(std::uint64_t x) const {
    const Wide fraction = m_ * x;  // mod 2^128
    const auto lo = static_cast<std::uint64_t>(fraction);
    const auto hi = static_cast<std::uint64_t>(fraction >> 64);
    // (hi * 2^64 + lo) * d / 2^128, floored: the low half's carry first.
    const Wide carry = (Wide{lo} * d_) >> 64;
    return static_cast<std::uint64_t>((Wide{hi} * d_ + carry) >> 64);
  }

 private:
  __extension__ using Wide = unsigned __int128;
  std::uint64_t d_;
  Wide m_;
};

// The elements of one row of the block, from global index `index` on.
template <bool kLocal, typename T, typename Remainder>
void fill_input_run(const InputPattern& p, const Remainder& remainder, double scale,
                    std::int64_t index, T* out, std::int64_t n) {
  const std::uint64_t key = p.key;
  const std::int64_t lo = p.range.lo;
  const auto rank_salt = static_cast<std::uint64_t>(p.rank + 1);
  for (std::int64_t k = 0; k < n; ++k, ++index) {
    std::uint64_t h = mix64(key ^ static_cast<std::uint64_t>(index));
    if constexpr (kLocal) h = mix64(h ^ rank_salt);
    const auto v = static_cast<double>(lo + static_cast<std::int64_t>(remainder(h)));
    out[k] = static_cast<T>(v * scale);
  }
}

template <typename T, typename Remainder>
void fill_input_run(const InputPattern& p, const Remainder& remainder, double scale,
                    std::int64_t index, T* out, std::int64_t n) {
  if (p.local)
    fill_input_run<true>(p, remainder, scale, index, out, n);
  else
    fill_input_run<false>(p, remainder, scale, index, out, n);
}

// Writes input_at(p, first + k) into out[k] for every k, converted to T
// (float: the value a double -> float conversion gives, as Backend::write
// does; every input value is a small integer times a power of two, exact in
// both).
template <typename T>
void fill_input_values(const InputPattern& p, std::int64_t first, std::span<T> out) {
  const auto span = static_cast<std::uint64_t>(p.range.hi - p.range.lo + 1);
  // Dividing by 2^shift and multiplying by 2^-shift round the same exact
  // product: the same double.
  const double scale = 1.0 / static_cast<double>(std::int64_t{1} << p.range.shift);
  const Remainder64 by_multiplication(span);
  // A span of a power of two (the classic [1, 4]) keeps the low bits.
  const auto by_mask = [mask = span - 1](std::uint64_t h) { return h & mask; };
  const bool power_of_two = (span & (span - 1)) == 0;
  const std::int64_t n = static_cast<std::int64_t>(out.size());
  std::int64_t row = first / p.local_cols;
  std::int64_t col = first - row * p.local_cols;
  for (std::int64_t k = 0; k < n; ++row, col = 0) {
    const std::int64_t index = (p.row_begin + row) * p.cols + p.col_begin + col;
    const std::int64_t run = std::min(n - k, p.local_cols - col);
    T* at = out.data() + k;
    if (power_of_two)
      fill_input_run(p, by_mask, scale, index, at, run);
    else
      fill_input_run(p, by_multiplication, scale, index, at, run);
    k += run;
  }
}

}  // namespace coconet::model
