#include "exec/verify.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <sstream>
#include <type_traits>

#include "exec/integer_values.h"
#include "model/error.h"

namespace coconet::exec {
namespace {

constexpr double kNormReorderTolerance = 0x1p-20;
// A regrouped f32 sum of non-integers (integer_values.h): as against the
// interpreter, a few roundings of 2^-24 each, carried through the layer.
constexpr double kSumReorderTolerance = 0x1p-16;
constexpr double kF32Tolerance = 0x1p-16;
constexpr double kF16Tolerance = 0x1p-10;
constexpr double kBf16Tolerance = 0x1p-7;
// Unit roundoff of the GEMMs' f32 accumulation (CUBLAS_COMPUTE_32F; the cpu
// backend's kernels accumulate in f32 too).
constexpr double kF32UnitRoundoff = 0x1p-24;
// Global indices are below 2^40 (a tensor of a trillion elements); keys
// combine them with the output's position, exactly representable in a double.
constexpr double kIndexSpan = 0x1p40;
// Elements of a backend's output read and compared at a time (OutputSources):
// 4 MiB of f32, so that no whole copy of a BERT-large tensor is made.
constexpr std::int64_t kVerifyBlock = std::int64_t{1} << 20;

struct LocalResult {
  double max_abs_error = 0.0;
  double key = std::numeric_limits<double>::infinity();  // output index * span + global index
  double expected = 0.0;
  double actual = 0.0;
};

std::int64_t global_index(const ValueInfo& v, std::int64_t local) {
  const std::int64_t r = local / v.local_cols;
  const std::int64_t c = local % v.local_cols;
  return (v.row_begin + r) * v.cols + v.col_begin + c;
}

void record(std::size_t position, const ValueInfo& info, std::int64_t i, double want, double got,
            LocalResult& out) {
  const double key = static_cast<double>(position) * kIndexSpan + static_cast<double>(global_index(info, i));
  if (key < out.key) out = LocalResult{out.max_abs_error, key, want, got};
}

// Calls run(i, j, n) for each run of n elements in which actual's local
// elements i.. and expected's j.. are the same global elements, over
// actual's local elements [first, last): a local tensor's parts match index
// for index; otherwise element (row, col) of actual's part matches where
// expected's part (ne elements) holds that row and column.
template <typename Run>
void for_each_match(const ValueInfo& ai, std::int64_t first, std::int64_t last, const ValueInfo& ei,
                    std::int64_t ne, Run&& run) {
  if (ei.type.layout.is_local() || ai.type.layout.is_local()) {
    const std::int64_t end = std::min(last, ne);
    if (first < end) run(first, first, end - first);
    return;
  }
  const std::int64_t cols = ai.local_cols;
  if (cols <= 0) return;
  if (ei.col_begin == ai.col_begin && ei.local_cols == cols) {
    // Whole rows of both parts (a 1-D tensor's elements are rows of one):
    // the rows they share are one run, expected's index actual's + shift.
    const std::int64_t shift = (ai.row_begin - ei.row_begin) * cols;
    const std::int64_t begin = std::max(first, -shift);
    const std::int64_t end = std::min({last, ei.local_rows * cols - shift, ne - shift});
    if (begin < end) run(begin, begin + shift, end - begin);
    return;
  }
  // The columns of a row of actual's part that expected's part holds.
  const std::int64_t first_col = std::clamp<std::int64_t>(ei.col_begin - ai.col_begin, 0, cols);
  const std::int64_t end_col = std::clamp<std::int64_t>(ei.col_begin + ei.local_cols - ai.col_begin, 0, cols);
  for (std::int64_t r = first / cols; r * cols < last; ++r) {
    const std::int64_t row = ai.row_begin + r;
    if (row < ei.row_begin || row >= ei.row_begin + ei.local_rows) continue;
    const std::int64_t j0 = (row - ei.row_begin) * ei.local_cols + (ai.col_begin - ei.col_begin);
    const std::int64_t begin = std::max(first_col, first - r * cols);
    const std::int64_t end = std::min({end_col, last - r * cols, ne - j0});
    if (begin < end) run(r * cols + begin, j0 + begin, end - begin);
  }
}

// Whether two runs of f32 hold the same bits, none of them an inf or a NaN
// (every exponent bit set): then each element is acceptable at any
// tolerance and differs by 0. A memcmp and a loop the compiler vectorises,
// for the common case of a schedule held exactly to the program.
bool identical_and_finite(const float* a, const float* e, std::int64_t n) {
  return std::memcmp(a, e, static_cast<std::size_t>(n) * sizeof(float)) == 0 && all_finite(a, n);
}

// n elements side by side, actual's first the local element i: the worst
// difference, then, only where some element is not acceptable, the first
// that is not (the run's smallest global index) recorded. One pass without
// a branch an element for the common case where all are.
template <typename A, typename E>
void compare_run(std::size_t position, const ValueInfo& ai, std::int64_t i, const A* a, const E* e, std::int64_t n,
                 double rtol, bool e_finite, LocalResult& out) {
  if constexpr (std::is_same_v<A, float> && std::is_same_v<E, float>) {
    // The usual verdict: nothing to add.
    if (e_finite ? std::memcmp(a, e, static_cast<std::size_t>(n) * sizeof(float)) == 0
                 : identical_and_finite(a, e, n))
      return;
  }
  double worst = out.max_abs_error;
  bool bad = false;
  for (std::int64_t k = 0; k < n; ++k) {
    const double want = e[k], got = a[k];
    const bool finite = std::isfinite(want) && std::isfinite(got);
    worst = std::max(worst, finite ? std::fabs(want - got) : INFINITY);
    bad |= !acceptable(want, got, rtol);
  }
  out.max_abs_error = worst;
  if (!bad) return;
  for (std::int64_t k = 0; k < n; ++k)
    if (!acceptable(e[k], a[k], rtol)) return record(position, ai, i + k, e[k], a[k], out);
}

// Compares actual's local elements from `first` on (held in `a`) with expected's part.
template <typename A>
void compare(std::size_t position, const ValueInfo& ai, std::int64_t first, std::span<const A> a,
             const OutputPart& e, double rtol, LocalResult& out) {
  std::visit(
      [&](const auto& expected) {
        const auto last = first + static_cast<std::int64_t>(a.size());
        for_each_match(ai, first, last, e.info, static_cast<std::int64_t>(expected.size()),
                       [&](std::int64_t i, std::int64_t j, std::int64_t n) {
                         compare_run(position, ai, i, a.data() + (i - first), expected.data() + j, n, rtol,
                                     e.finite, out);
                       });
      },
      e.values);
}

// The verdict of every rank's result, agreed over the world.
Verdict combine(Backend& backend, const std::vector<std::string>& outputs, const LocalResult& mine,
                const std::string& against) {
  std::vector<double> worst{mine.max_abs_error};
  std::vector<double> first{mine.key};
  backend.host_allreduce(worst, model::ReduceOp::max);
  backend.host_allreduce(first, model::ReduceOp::min);
  Verdict v;
  v.max_abs_error = worst[0];
  if (std::isinf(first[0])) return v;
  std::vector<double> owner{mine.key == first[0] ? static_cast<double>(backend.world_rank()) : INFINITY};
  backend.host_allreduce(owner, model::ReduceOp::min);
  const bool is_owner = owner[0] == backend.world_rank();
  std::vector<double> values{is_owner ? mine.expected : 0.0, is_owner ? mine.actual : 0.0};
  backend.host_allreduce(values, model::ReduceOp::sum);
  const auto k = static_cast<std::size_t>(first[0] / kIndexSpan);
  const auto index = static_cast<std::int64_t>(first[0] - static_cast<double>(k) * kIndexSpan);
  std::ostringstream msg;
  msg << outputs.at(k) << "[" << index << "] on rank " << static_cast<int>(owner[0]) << ": expected "
      << values[0] << " (" << against << "), got " << values[1];
  if (!std::isfinite(values[0]))
    msg << "; the reference is not finite, so it verifies nothing (an f16 overflow? choose smaller sizes)";
  else if (!std::isfinite(values[1]))
    msg << "; a non-finite result where the reference is finite";
  v.ok = false;
  v.first_mismatch = msg.str();
  return v;
}

}  // namespace

bool acceptable(double want, double got, double rtol) {
  if (!std::isfinite(want) || !std::isfinite(got)) return false;
  return std::fabs(want - got) <= rtol * std::max(std::fabs(want), 1.0);
}

double gemm_reorder_tolerance(std::int64_t k, model::DType out) {
  const double sum = static_cast<double>(std::max<std::int64_t>(k, 1)) * kF32UnitRoundoff;
  return out == model::DType::f32 ? sum : sum + interpreter_tolerance(out);
}

double schedule_tolerance(const model::Program& p, const model::Bindings& sizes) {
  double tol = 0.0;
  if (sums_non_integers(p)) tol = kSumReorderTolerance;
  for (const auto& s : p.stmts) {
    if (s.op == model::OpKind::norm) tol = std::max(tol, kNormReorderTolerance);
    if (s.op != model::OpKind::matmul) continue;
    const model::Shape& a = p.type_of(s.operands.at(0)).shape;
    tol = std::max(tol, gemm_reorder_tolerance(a.back().eval(sizes), s.type.dtype));
  }
  return tol;
}

double interpreter_tolerance(model::DType t) {
  switch (t) {
    case model::DType::f32: return kF32Tolerance;
    case model::DType::f16: return kF16Tolerance;
    case model::DType::bf16: return kBf16Tolerance;
  }
  return kF32Tolerance;
}

bool all_finite(const float* v, std::int64_t n) {
  constexpr std::uint32_t kExponent = 0x7f800000u;  // f32's exponent bits: all set for inf and NaN
  bool finite = true;
  for (std::int64_t k = 0; k < n; ++k) finite &= (std::bit_cast<std::uint32_t>(v[k]) & kExponent) != kExponent;
  return finite;
}

Verdict verify(Backend& backend, const std::vector<std::string>& outputs, const Outputs& actual,
               const Outputs& expected, double rtol, const std::string& against) {
  LocalResult mine;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto a = actual.find(outputs[k]);
    const auto e = expected.find(outputs[k]);
    if (a == actual.end() || e == expected.end()) continue;
    const double tol = rtol >= 0 ? rtol : interpreter_tolerance(a->second.info.type.dtype);
    std::visit([&](const auto& values) { compare(k, a->second.info, 0, std::span(values), e->second, tol, mine); },
               a->second.values);
  }
  return combine(backend, outputs, mine, against);
}

Verdict verify(Backend& backend, const std::vector<std::string>& outputs, const OutputSources& actual,
               const Outputs& expected, double rtol, const std::string& against) {
  LocalResult mine;
  std::vector<float> block;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto a = actual.find(outputs[k]);
    const auto e = expected.find(outputs[k]);
    if (a == actual.end() || e == expected.end()) continue;
    const double tol = rtol >= 0 ? rtol : interpreter_tolerance(a->second.info.type.dtype);
    for (std::int64_t first = 0; first < a->second.count; first += kVerifyBlock) {
      const std::int64_t n = std::min(kVerifyBlock, a->second.count - first);
      if (const auto held = a->second.view ? a->second.view(first, n) : std::nullopt) {
        compare(k, a->second.info, first, *held, e->second, tol, mine);
        continue;
      }
      block.resize(static_cast<std::size_t>(n));
      a->second.read(first, std::span<float>(block));
      compare(k, a->second.info, first, std::span<const float>(block), e->second, tol, mine);
    }
  }
  return combine(backend, outputs, mine, against);
}

}  // namespace coconet::exec
