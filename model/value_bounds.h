// A bound analysis of value magnitudes: the interval every element of every
// value of a program lies in, for inputs drawn from given ranges
// (model/input_pattern.h), propagated through the program's statements
// without running them. It is sound for any inputs in those ranges (every
// element of a value lies in its interval) and conservative: interval
// arithmetic forgets that two operands are related, except where a rule
// below knows it.
//
// Rules per operation (P ranks per group):
//   - element-wise: interval arithmetic per expression node; x*x >= 0;
//     dropout(x, p) in hull(0, x / (1 - p)); gelu(x) >= -0.17 (its minimum,
//     -0.16997 at x = -0.75179); comparisons in [0, 1];
//     `t - m` with m = rowmax(t) is <= 0 (the softmax's shift), and `e / s`
//     with s = rowsum(e), e > 0, is in (0, 1] (the softmax's ratio);
//     `t * rsqrt(s / c + eps)` with s = rowsum(t * t), c > 0, eps >= 0 (a
//     LayerNorm's or RMSNorm's scale, inline or as its own statement) is
//     at most sqrt(c) in magnitude, since t_i^2 <= s;
//   - matmul: K terms per element, K the reduction length one rank sums
//     (its slice where the reduced dimension is sliced);
//   - rowsum: n terms (a rank's columns where sliced); rowmax: the operand's;
//   - norm: sqrt(N) times the operand's magnitudes, N its elements;
//   - allreduce, reduce-scatter, reduce with sum: P terms; with max, min, and
//     allgather, broadcast, alltoall, send: the operand's interval.
// A domain problem (sqrt or rsqrt or log of an interval reaching below 0 or
// to 0, a divisor whose interval holds 0, pow of a base that may be
// negative) makes the value unbounded and is reported, naming the statement.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/input_pattern.h"
#include "model/program.h"

namespace coconet::model {

struct Interval {
  double lo = 0.0;
  double hi = 0.0;
  [[nodiscard]] double magnitude() const;  // max(|lo|, |hi|); infinite when unbounded
  [[nodiscard]] bool bounded() const;      // both ends finite
};

struct ValueBounds {
  std::map<std::string, Interval> values;  // every input and statement value, by name
  // The largest magnitude of any sub-expression of each element-wise
  // statement (computed in f32 before the result is rounded to its dtype).
  std::map<std::string, double> inner;
  std::vector<std::string> problems;  // domain problems, "statement 'v' (file:line): ..."
};

// The intervals of every value of `p` at `sizes` on `ranks` ranks per group,
// each input i drawn from ranges[i] (one per input, in declaration order).
[[nodiscard]] ValueBounds bound_values(const Program& p, const Bindings& sizes, int ranks,
                                       const std::vector<InputRange>& ranges);

// The largest finite value of a dtype (f16 65504, bf16 and f32 about 3.4e38).
[[nodiscard]] double max_finite(DType t);

// The smallest ratio, over every value and every element-wise statement's
// sub-expressions, of the largest finite value of its dtype (f32 for
// sub-expressions) to its bound; 0 when a bound is infinite or a domain
// problem was found. A headroom of at least 2 leaves a binade for rounding.
struct Headroom {
  double ratio = 0.0;
  std::string value;  // the value that has the least
};
[[nodiscard]] Headroom headroom(const Program& p, const ValueBounds& b);

}  // namespace coconet::model
