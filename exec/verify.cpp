#include "exec/verify.h"

#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

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

// Where expected's part holds the element at `local` of actual's part, if it does.
std::optional<std::int64_t> locate(const ValueInfo& e, const ValueInfo& a, std::int64_t local) {
  if (e.type.layout.is_local() || a.type.layout.is_local()) return local;
  const std::int64_t row = a.row_begin + local / a.local_cols;
  const std::int64_t col = a.col_begin + local % a.local_cols;
  if (row < e.row_begin || row >= e.row_begin + e.local_rows) return std::nullopt;
  if (col < e.col_begin || col >= e.col_begin + e.local_cols) return std::nullopt;
  return (row - e.row_begin) * e.local_cols + (col - e.col_begin);
}

void record(std::size_t position, const ValueInfo& info, std::int64_t i, double want, double got,
            LocalResult& out) {
  const double key = static_cast<double>(position) * kIndexSpan + static_cast<double>(global_index(info, i));
  if (key < out.key) out = LocalResult{out.max_abs_error, key, want, got};
}

void compare(std::size_t position, const OutputPart& a, const OutputPart& e, double rtol, LocalResult& out) {
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(a.values.size()); ++i) {
    const auto j = locate(e.info, a.info, i);
    if (!j || *j >= static_cast<std::int64_t>(e.values.size())) continue;
    const double want = e.values[static_cast<std::size_t>(*j)];
    const double got = a.values[static_cast<std::size_t>(i)];
    const bool finite = std::isfinite(want) && std::isfinite(got);
    out.max_abs_error = std::max(out.max_abs_error, finite ? std::fabs(want - got) : INFINITY);
    if (!acceptable(want, got, rtol)) record(position, a.info, i, want, got, out);
  }
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

Verdict verify(Backend& backend, const std::vector<std::string>& outputs, const Outputs& actual,
               const Outputs& expected, double rtol, const std::string& against) {
  LocalResult mine;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto a = actual.find(outputs[k]);
    const auto e = expected.find(outputs[k]);
    if (a == actual.end() || e == expected.end()) continue;
    const double tol = rtol >= 0 ? rtol : interpreter_tolerance(a->second.info.type.dtype);
    compare(k, a->second, e->second, tol, mine);
  }
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

}  // namespace coconet::exec
