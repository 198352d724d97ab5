// Which ranges a program's inputs are drawn from (model/input_pattern.h), so
// that every value stays finite in its dtype at the program's sizes and rank
// count, with a binade to spare, and the comparison of a run with its
// reference stays meaningful (inputs vary, sums cancel, results are far from
// both overflow and zero).
//
// The choice walks a ladder of candidates and keeps the first whose bounds
// (model/value_bounds.h) fit with headroom kInputHeadroom:
//   0. the classic ranges: local inputs [-3, 3], the others [1, 4];
//   1-3. signed integers [-M, M] for M = 3, 2, 1, so that a GEMM's sums
//      cancel (a long positive sum grows with K, a signed one typically with
//      sqrt(K)); inputs that reach a sqrt, rsqrt, log, pow or a divisor stay
//      positive, [1, M + 1];
//   4-. those of M = 1 scaled by 2^-s, s = 1 .. kMaxInputShift: exact, as a
//      power of two, while the values stay normal in f16.
// The choice depends on the program's statements, so a run passes the ranges
// its reference chose to every schedule (their programs differ) rather than
// choosing again.
#pragma once

#include <string>
#include <vector>

#include "model/input_pattern.h"
#include "model/program.h"

namespace coconet::model {

// A bound may reach 1/2 of the largest finite value of its type: one binade
// left for what the analysis does not model (the rounding of a 16-bit result
// up to the next binade, an f32 accumulation's last carry).
inline constexpr double kInputHeadroom = 2.0;
// The largest scale 2^-s of the last rungs: values of M = 1 scaled by 2^-6
// and their products (2^-12) stay normal f16 numbers (the smallest is 2^-14).
inline constexpr int kMaxInputShift = 6;

struct InputChoice {
  std::vector<InputRange> ranges;  // one per input, in declaration order
  int rung = 0;                    // the ladder's step (above)
  double headroom = 0.0;           // the least ratio of a type's largest value to a bound
  std::string tightest;            // the value with that ratio
};

// The inputs of rung `rung` of the ladder (rung 0: the classic ranges); the
// inputs that must be positive are found from the program.
[[nodiscard]] std::vector<InputRange> ladder_ranges(const Program& p, int rung);
// The number of rungs of the ladder.
[[nodiscard]] int ladder_rungs();

// The first rung whose bounds fit with kInputHeadroom. Throws UserError when
// none does, naming the value whose bound is out of range and the sizes.
[[nodiscard]] InputChoice choose_inputs(const Program& p, const Bindings& sizes, int ranks);

// Inputs (by index) that reach, through any statements, an operand that must
// be positive: the argument of sqrt, rsqrt, log, the base of pow, a divisor.
[[nodiscard]] std::vector<bool> inputs_needing_positive(const Program& p);

}  // namespace coconet::model
