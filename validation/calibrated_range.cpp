// The calibrated range: recorded as "key=value" pairs on one comment line.
#include "validation/calibrated_range.h"

#include <algorithm>

#include <fmt/core.h>

#include "sim/compute.h"
#include "validation/topology_comment.h"

namespace coconet::validation {

namespace {
constexpr const char* kElementwise = "elementwise_bytes";
constexpr const char* kCollective = "collective_bytes";
constexpr const char* kGemm = "gemm_flops";
}  // namespace

CalibratedRange range_of(const std::vector<MicroSample>& samples) {
  CalibratedRange r;
  for (const auto& s : samples) {
    if (s.kind == MicroKind::elementwise) r.elementwise_bytes = std::max(r.elementwise_bytes, s.bytes);
    if (s.kind == MicroKind::collective) r.collective_bytes = std::max(r.collective_bytes, s.bytes);
    if (s.kind == MicroKind::gemm) r.gemm_flops = std::max(r.gemm_flops, s.flops);
  }
  return r;
}

std::string range_comment(const CalibratedRange& r) {
  return fmt::format("{} {}={:.0f} {}={:.0f} {}={:.0f}\n", kRangeComment, kElementwise, r.elementwise_bytes,
                     kCollective, r.collective_bytes, kGemm, r.gemm_flops);
}

std::optional<CalibratedRange> parse_range(const std::string& text) {
  const auto fields = comment_fields(text, kRangeComment);
  if (!fields) return std::nullopt;
  const auto value = [&](const char* key) { return fields->contains(key) ? fields->at(key) : 0.0; };
  return CalibratedRange{value(kElementwise), value(kCollective), value(kGemm)};
}

std::vector<std::string> beyond_range(const plan::StepPlan& plan, const CalibratedRange& r) {
  std::vector<std::string> out;
  auto check = [&](const plan::Op& op, double value, double limit, const char* what) {
    if (limit > 0 && value > limit)
      out.push_back(fmt::format("{}: {:.0f} {} > {:.0f} calibrated", op.code, value, what, limit));
  };
  for (const auto& op : plan.ops) {
    if (op.work.gemm) check(op, sim::GemmShape{op.work.gemm->m, op.work.gemm->n, op.work.gemm->k, op.work.gemm->dtype}.flops(), r.gemm_flops, "GEMM FLOPs");
    else check(op, op.work.hbm_bytes, r.elementwise_bytes, "element-wise bytes");
    for (const auto& c : op.work.collectives) check(op, c.bytes, r.collective_bytes, "collective bytes");
  }
  return out;
}

}  // namespace coconet::validation
