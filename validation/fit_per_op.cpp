// Per-operation fits: each op's samples in each regime, two constants each.
#include "validation/fit_per_op.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "sim/collective_mpi.h"
#include "sim/units.h"

namespace coconet::validation {

sim::OpConstants op_constants(const OpFit& f) { return {f.base_us, f.GBps}; }

double op_model_us(const OpFit& f, const std::string& op, double bytes, int ranks) {
  return sim::own_op_us(op_constants(f), features_of(op, bytes, ranks));
}

std::optional<OpFit> fit_op(const std::vector<CollectiveSample>& s) {
  std::set<double> sizes;
  for (const auto& c : s) sizes.insert(c.bytes);
  if (sizes.size() < kOpConstants) return std::nullopt;
  std::vector<std::vector<double>> a;
  std::vector<double> y;
  for (const auto& c : s) {
    // The second unknown is 1 / GBps: microseconds per thousand bus bytes.
    a.push_back({1.0, features_of(c.op, c.bytes, c.ranks).bus_bytes / sim::kBytesPerGBpsUs});
    y.push_back(c.measured_us);
  }
  const std::vector<double> x = fit_relative_nonnegative(a, y);
  OpFit f;
  f.base_us = x[0];
  f.GBps = x[1] > 0 ? 1.0 / x[1] : std::numeric_limits<double>::infinity();
  f.samples = static_cast<int>(s.size());
  return f;
}

namespace {

int usual_ranks(const std::vector<CollectiveSample>& s) {
  std::map<int, int> count;
  for (const auto& c : s)
    if (c.op != "send") ++count[c.ranks];
  int best = 0, most = 0;
  for (const auto& [r, n] : count)
    if (n > most) {
      best = r;
      most = n;
    }
  return best;
}

}  // namespace

PerOpFit fit_per_op(const std::vector<CollectiveSample>& s, double threshold_bytes) {
  PerOpFit f;
  f.ranks = usual_ranks(s);
  std::map<std::string, std::vector<CollectiveSample>> small, large;
  for (const auto& c : s)
    if (c.ranks == f.ranks || c.op == "send") (threshold_bytes > 0 && c.bytes >= threshold_bytes ? large : small)[c.op].push_back(c);
  for (const auto& [op, v] : small) f.ops[op].small = fit_op(v);
  for (const auto& [op, v] : large) f.ops[op].large = fit_op(v);
  return f;
}

}  // namespace coconet::validation
