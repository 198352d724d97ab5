// Verification of a run: this rank's parts of the program outputs compared
// with a reference (the unscheduled program run on the same backend, or the
// reference interpreter), element by element by global index, then agreed on
// across all ranks so every rank knows the verdict and the first differing
// element.
//
// Every element must be finite on both sides (see acceptable()).
//
// Tolerances (relative to max(|expected|, 1), as model::compare_outputs):
//  - schedule vs unscheduled program, same backend: exact (0). Inputs are
//    small integers times a power of two (model/input_ranges.h), so every
//    reduction order gives the same sums while they fit the f32 mantissa, and each
//    element's arithmetic is the same f32 program whatever the schedule.
//    Except programs with a norm: the sum of squares of a sliced non-integer
//    tensor is added in another order than the whole one's, which may move
//    the f32 norm by an ulp: 2^-20 (a few f32 ulps after the update's scaling).
//    A matmul's sums are regrouped too (row chunks, split-K): gemm_reorder_tolerance
//    of its reduction length and output type, below.
//    A fused op runs the same compiled programs as the statements' own
//    kernels (exec/fused_call.h), so it is held to the same. And programs
//    whose matmuls or summing collectives read values that need not be
//    integers (exec/integer_values.h: after a LayerNorm, a GELU, a softmax):
//    a schedule regroups those sums (a GEMM cut into row chunks, an
//    allreduce split), which may move them by rounding: 2^-16, as f32
//    against the interpreter.
//  - backend vs reference interpreter (double precision, no rounding to
//    storage types): f32 outputs 2^-16 (f32 arithmetic, ~ten roundings of
//    2^-24 each, plus the update's cancellation w - lr*...), f16 outputs 2^-10
//    (the result is rounded once to f16, half an ulp, computed in f32 first),
//    bf16 outputs 2^-7 (same, for bf16's 8-bit mantissa).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "exec/backend.h"
#include "exec/rank_values.h"

namespace coconet::exec {

// f32 values in host memory that ranks of a node may share
// (Backend::share_on_node): the unscheduled program's outputs, held once per
// host where ranks hold the same part (exec/runtime.cpp).
struct SharedF32 {
  std::shared_ptr<const std::byte> owner;  // keeps the region mapped
  const float* first = nullptr;
  std::size_t count = 0;
  [[nodiscard]] const float* data() const { return first; }
  [[nodiscard]] std::size_t size() const { return count; }
  [[nodiscard]] const float* begin() const { return first; }
  [[nodiscard]] const float* end() const { return first + count; }
};

// An output's values on the host: f32 as a backend stores them (f16, bf16
// and f32 values exactly, half a double copy's memory at BERT-large sizes),
// in a vector or a region ranks share, or double as the reference
// interpreter computes them (no rounding to a storage type).
using HostValues = std::variant<std::vector<float>, std::vector<double>, SharedF32>;

// One output's part on this rank, and where it sits in the global tensor.
struct OutputPart {
  ValueInfo info;
  HostValues values;
  // Every value finite, as the reference's are known to be once read: a
  // result equal to them bit for bit is then finite too (no pass to check).
  bool finite = false;
};
using Outputs = std::map<std::string, OutputPart>;  // by output name

// An output's part on this rank as a backend holds it, read in blocks
// rather than copied whole: read(first, out) writes out.size() of its f32
// values from local element `first` on (the part's row-major order).
struct OutputSource {
  ValueInfo info;
  std::int64_t count = 0;  // the part's elements
  std::function<void(std::int64_t first, std::span<float> out)> read;
  // The same values where the backend holds them as f32 on the host
  // (Backend::host_f32): compared in place, no copy. May be empty.
  std::function<std::optional<std::span<const float>>(std::int64_t first, std::int64_t count)> view;
};
using OutputSources = std::map<std::string, OutputSource>;  // by output name

// Whether every one of n f32 values is finite (no exponent of all ones): a
// loop the compiler vectorises, for the reference's and a run's values.
[[nodiscard]] bool all_finite(const float* v, std::int64_t n);

struct Verdict {
  bool ok = true;
  double max_abs_error = 0.0;
  std::string first_mismatch;  // "w1[12]: expected 3 got 3.5 (rank 1)" when !ok
};

// Whether `got` stands for `want` within `rtol` relative to max(|want|, 1).
// A non-finite value on either side never does: an inf or NaN where the
// reference is finite is wrong, and a non-finite reference (an f16 overflow
// in the unscheduled program) equals an equally overflowed wrong result, so
// it verifies nothing (inf == inf used to pass).
[[nodiscard]] bool acceptable(double want, double got, double rtol);

// A matmul's K-term f32 sum regrouped by a schedule (row chunks; split-K on
// the GPU, whose partial sums cuBLAS adds in f32 under kGemmMathMode): the
// bound of recursive summation, K u with u = 2^-24 (Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., 2002, section 4.2), plus, for a
// 16-bit output, the half ulp either way its rounding may then go
// (interpreter_tolerance of the type).
[[nodiscard]] double gemm_reorder_tolerance(std::int64_t k, model::DType out);
// The tolerance of a schedule against the unscheduled program at `sizes`:
// the largest of the rules above that the program's statements call for.
[[nodiscard]] double schedule_tolerance(const model::Program& p, const model::Bindings& sizes);
[[nodiscard]] double interpreter_tolerance(model::DType t);

// Compares `actual` with `expected` over `outputs` (names in order) on every
// rank and combines the results over the world (collective: every rank calls
// it). `rtol` < 0 means: interpreter_tolerance of each output's dtype.
[[nodiscard]] Verdict verify(Backend& backend, const std::vector<std::string>& outputs, const Outputs& actual,
                             const Outputs& expected, double rtol, const std::string& against);
// The same with `actual` read from the backend a block at a time.
[[nodiscard]] Verdict verify(Backend& backend, const std::vector<std::string>& outputs, const OutputSources& actual,
                             const Outputs& expected, double rtol, const std::string& against);

}  // namespace coconet::exec
