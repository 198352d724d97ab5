// Which values of a program hold integers when its inputs do (the verifier's
// inputs are small integers times a power of two, model/input_pattern.h): a schedule may regroup a
// sum (a matmul cut into row chunks that the GEMM blocks differently, an
// allreduce split into a reduce-scatter and an allgather) and the sum of
// integers is the same in every order, but a sum of other values may move by
// rounding. The verifier holds schedules of programs that regroup sums of
// non-integers to a tolerance instead of exactness (exec/verify.h).
#pragma once

#include "model/program.h"

namespace coconet::exec {

// Whether some matmul or summing collective (allreduce, reduce-scatter,
// reduce with sum or mean) of `p` reads a value that need not be an integer:
// one computed with a division, a root, exp, log, tanh, gelu, pow, dropout's
// scaling, a mean's division or a non-integer constant or scalar, or from such a value.
[[nodiscard]] bool sums_non_integers(const model::Program& p);

}  // namespace coconet::exec
