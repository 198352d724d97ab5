// The two-regime fit: every candidate threshold splits the samples by size,
// each side is fitted on its own, and the split with the smallest residual of
// the whole model (step-up rule included) wins; then the information criterion
// decides between it and one regime.
#include "validation/fit_regimes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/core.h>

#include "sim/collective_mpi.h"

namespace coconet::validation {

namespace {

// Constants of one regime: base, hop, link rate, reduction rate.
constexpr std::size_t kRegimeConstants = 4;
// A one-regime fit this close to every sample (root mean square relative
// error) leaves nothing for a second regime to explain but rounding.
constexpr double kExactFitRms = 1e-3;

}  // namespace

double regimes_residual(const CollectiveRegimes& f, const std::vector<CollectiveSample>& s) {
  double sum = 0;
  for (const auto& c : s) sum += std::pow(regimes_model_us(f, c.op, c.bytes, c.ranks) / c.measured_us - 1.0, 2);
  return sum;
}

std::optional<CollectiveRegimes> fit_split(const std::vector<CollectiveSample>& s, double threshold) {
  std::vector<CollectiveSample> below, above;
  for (const auto& c : s) (c.bytes < threshold ? below : above).push_back(c);
  if (below.size() < kRegimeConstants || above.size() < kRegimeConstants) return std::nullopt;
  CollectiveRegimes f;
  f.small = fit_collectives(below, false);
  f.large = fit_collectives(above, false);
  f.threshold_bytes = threshold;
  f.residual = regimes_residual(f, s);
  return f;
}

namespace {

// `f` with each op's own constants on its regimes, its residual that of the whole.
CollectiveRegimes with_per_op(CollectiveRegimes f, const std::vector<CollectiveSample>& s) {
  f.per_op = fit_per_op(s, f.large ? f.threshold_bytes : 0.0);
  f.residual = regimes_residual(f, s);
  return f;
}

// The candidate split with the smallest residual: every distinct sample size.
std::optional<CollectiveRegimes> best_split(const std::vector<CollectiveSample>& s) {
  std::set<double> sizes;
  for (const auto& c : s) sizes.insert(c.bytes);
  std::optional<CollectiveRegimes> best;
  for (double t : sizes) {
    auto f = fit_split(s, t);
    if (f && (!best || f->residual < best->residual)) best = std::move(f);
  }
  return best;
}

}  // namespace

sim::MpiFit mpi_fit(const CollectiveRegimes& f) {
  sim::MpiFit m;
  m.small = ring_constants(f.small);
  if (f.large) {
    m.large = ring_constants(*f.large);
    m.from_bytes = f.threshold_bytes;
  }
  if (f.per_op.ranks > 0) {
    sim::PerOp p;
    p.ranks = f.per_op.ranks;
    for (const auto& [op, g] : f.per_op.ops) {
      sim::OpRegimes r;
      if (g.small) r.small = op_constants(*g.small);
      if (g.large) r.large = op_constants(*g.large);
      p.ops.emplace_back(sim::parse_coll_op(op), r);
    }
    m.per_op = std::move(p);
  }
  return m;
}

double regimes_model_us(const CollectiveRegimes& f, const std::string& op, double bytes, int ranks) {
  sim::CollectiveRequest r;
  r.op = sim::parse_coll_op(op);
  r.bytes = bytes;
  r.where = sim::Placement{ranks, 1, ranks};
  return sim::mpi_cost(mpi_fit(f), r).time_us();
}

CollectiveRegimes fit_collective_regimes(const std::vector<CollectiveSample>& s,
                                         std::optional<double> library_threshold_bytes,
                                         const std::string& library_source) {
  CollectiveRegimes one;
  one.small = fit_collectives(s);
  one.residual = regimes_residual(one, s);
  const auto fitted = best_split(s);
  one.fitted_threshold_bytes = fitted ? fitted->threshold_bytes : 0.0;

  std::optional<CollectiveRegimes> two;
  std::size_t constants = 2 * kRegimeConstants;  // a threshold read from the library is not fitted
  if (library_threshold_bytes) two = fit_split(s, *library_threshold_bytes);
  if (two) {
    two->threshold_source = library_source;
  } else if (fitted) {
    two = fitted;
    two->threshold_source = "fit: the sample size that minimises the residual";
    ++constants;
  }
  const double rms = std::sqrt(one.residual / static_cast<double>(s.size()));
  if (!two || rms <= kExactFitRms || schwarz_criterion(two->residual, s.size(), constants) >= schwarz_criterion(one.residual, s.size(), kRegimeConstants))
    return with_per_op(one, s);
  two->fitted_threshold_bytes = one.fitted_threshold_bytes;
  return with_per_op(*two, s);
}

}  // namespace coconet::validation
