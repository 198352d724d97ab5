// The fits. Unknowns are few (three at most), so each solve is a small dense
// QR (Eigen's ColPivHouseholderQR); non-negativity is kept by fixing the most
// negative unknown at zero and solving again.
#include "validation/fit.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>
#include <fmt/core.h>

#include "model/error.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/units.h"

namespace coconet::validation {

namespace {
using sim::kBytesPerGBpsUs;
constexpr int kMaxRegimeIterations = 32;

std::vector<double> solve_free(const std::vector<std::vector<double>>& a, const std::vector<double>& y,
                               const std::vector<double>& known, const std::vector<bool>& fixed) {
  const std::size_t n = a.front().size();
  std::vector<std::size_t> cols;
  for (std::size_t j = 0; j < n; ++j)
    if (!fixed[j]) cols.push_back(j);
  std::vector<double> x(n, 0.0);
  if (cols.empty()) return x;
  Eigen::MatrixXd m(a.size(), cols.size());
  Eigen::VectorXd b(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (std::size_t k = 0; k < cols.size(); ++k) m(i, k) = a[i][cols[k]] / y[i];
    b(i) = known.empty() ? 1.0 : 1.0 - known[i] / y[i];
  }
  const Eigen::VectorXd sol = m.colPivHouseholderQr().solve(b);
  for (std::size_t k = 0; k < cols.size(); ++k) x[cols[k]] = sol(k);
  return x;
}
}  // namespace

std::vector<double> fit_relative_nonnegative(const std::vector<std::vector<double>>& a, const std::vector<double>& y,
                                             const std::vector<double>& known) {
  if (a.empty() || a.size() != y.size() || (!known.empty() && known.size() != y.size()))
    throw UserError("a fit needs as many measured times as samples, and at least one");
  const std::size_t n = a.front().size();
  if (a.size() < n)
    throw UserError(fmt::format("a fit of {} constants needs at least {} samples, got {}", n, n, a.size()));
  for (double v : y)
    if (!(v > 0)) throw UserError(fmt::format("a measured time of {} us cannot be fitted: times must be positive", v));
  std::vector<bool> fixed(n, false);
  for (std::size_t round = 0; round <= n; ++round) {
    std::vector<double> x = solve_free(a, y, known, fixed);
    std::size_t worst = n;
    for (std::size_t j = 0; j < n; ++j)
      if (!fixed[j] && x[j] < 0 && (worst == n || x[j] < x[worst])) worst = j;
    if (worst == n) return x;
    fixed[worst] = true;
  }
  return std::vector<double>(n, 0.0);
}

double elementwise_model_us(const ElementwiseFit& f, double bytes, double flops) {
  return f.launch_us + sim::roofline_us(bytes, f.GBps * kBytesPerGBpsUs, flops, f.GFLOPs * sim::kFlopsPerGflopsUs);
}

ElementwiseFit fit_elementwise(const std::vector<ElementwiseSample>& s) {
  std::vector<std::vector<double>> a;
  std::vector<double> y;
  for (const auto& e : s) {
    a.push_back({1.0, e.bytes, e.flops});
    y.push_back(e.measured_us);
  }
  std::vector<double> x = fit_relative_nonnegative(a, y);  // additive start
  ElementwiseFit f;
  std::vector<int> side(s.size(), -1);
  for (f.iterations = 0; f.iterations < kMaxRegimeIterations; ++f.iterations) {
    bool changed = false;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const int now = s[i].bytes * x[1] >= s[i].flops * x[2] ? 0 : 1;
      changed = changed || now != side[i];
      side[i] = now;
    }
    if (!changed) break;
    for (std::size_t i = 0; i < s.size(); ++i) a[i] = {1.0, side[i] == 0 ? s[i].bytes : 0.0, side[i] == 1 ? s[i].flops : 0.0};
    std::vector<double> next = fit_relative_nonnegative(a, y);
    // An unknown no sample constrains keeps its previous value.
    for (int j = 1; j <= 2; ++j)
      if (std::none_of(side.begin(), side.end(), [&](int v) { return v == j - 1; })) next[j] = x[j];
    x = next;
  }
  f.launch_us = x[0];
  f.GBps = x[1] > 0 ? 1.0 / (x[1] * kBytesPerGBpsUs) : std::numeric_limits<double>::infinity();
  f.GFLOPs = x[2] > 0 ? 1.0 / (x[2] * sim::kFlopsPerGflopsUs) : std::numeric_limits<double>::infinity();
  return f;
}

GemmFit fit_gemm(const std::vector<GemmSample>& s, double launch_us) {
  std::vector<std::vector<double>> flops_only, both;
  std::vector<double> y, known;
  for (const auto& g : s) {
    if (!(g.measured_us > 0)) throw UserError("a GEMM time must be positive to be fitted");
    flops_only.push_back({g.flops});
    both.push_back({g.flops, g.bytes});
    y.push_back(g.measured_us);
    known.push_back(launch_us);
  }
  const auto rate = [](double us_per_unit, double units_per_us) {
    return us_per_unit > 0 ? 1.0 / (us_per_unit * units_per_us) : std::numeric_limits<double>::infinity();
  };
  if (s.size() >= 2) {
    const std::vector<double> x = fit_relative_nonnegative(both, y, known);
    if (x[0] > 0) return {rate(x[0], sim::kFlopsPerGflopsUs), rate(x[1], kBytesPerGBpsUs)};
  }
  const std::vector<double> x = fit_relative_nonnegative(flops_only, y, known);
  if (!(x[0] > 0)) throw UserError("the GEMM microbenchmarks give no positive rate to fit");
  return {rate(x[0], sim::kFlopsPerGflopsUs), std::numeric_limits<double>::infinity()};
}

double gemm_model_us(const GemmFit& f, double launch_us, double flops, double bytes) {
  return launch_us + sim::gemm_flops_us(flops, f.GFLOPs * sim::kFlopsPerGflopsUs) +
         sim::gemm_operands_us(bytes, f.operand_GBps);
}

sim::RingFeatures features_of(const std::string& op, double bytes, int ranks) {
  return sim::ring_features(sim::parse_coll_op(op), ranks, 1, bytes);
}

sim::RingConstants ring_constants(const CollectiveFit& f) { return {f.base_us, f.hop_us, f.hop_us, f.GBps, f.reduce_GBps}; }

double collective_model_us(const CollectiveFit& f, const std::string& op, double bytes, int ranks) {
  return sim::ring_us(ring_constants(f), features_of(op, bytes, ranks));
}

double relative_residual(const std::vector<double>& predicted, const std::vector<double>& measured) {
  double sum = 0;
  for (std::size_t j = 0; j < measured.size(); ++j) sum += std::pow(predicted.at(j) / measured[j] - 1.0, 2);
  return sum;
}

double schwarz_criterion(double residual, std::size_t n, std::size_t constants) {
  constexpr double kTinyResidual = 1e-300;  // keeps log() finite for a residual of exactly zero
  const double dn = static_cast<double>(n);
  return dn * std::log(std::max(residual, kTinyResidual) / dn) + static_cast<double>(constants) * std::log(dn);
}

double fit_scalar(const std::vector<double>& measured, const std::function<std::vector<double>(double)>& model,
                  double lo, double hi) {
  if (measured.empty()) throw UserError("a fit needs at least one measured time");
  constexpr int kSteps = 40;  // grid resolution: (hi - lo) / 40
  double best = lo, best_err = std::numeric_limits<double>::infinity();
  for (int i = 0; i <= kSteps; ++i) {
    const double x = lo + (hi - lo) * i / kSteps;
    const double err = relative_residual(model(x), measured);
    if (err < best_err) {
      best_err = err;
      best = x;
    }
  }
  return best;
}

CollectiveFit fit_collectives(const std::vector<CollectiveSample>& s, bool need_rate) {
  std::vector<std::vector<double>> a;
  std::vector<double> y;
  for (const auto& c : s) {
    const sim::RingFeatures x = features_of(c.op, c.bytes, c.ranks);
    a.push_back({1.0, x.steps(), x.bus_bytes, x.reduced_bytes});
    y.push_back(c.measured_us);
  }
  const auto x = fit_relative_nonnegative(a, y);
  if (need_rate && !(x[2] > 0))
    throw UserError("the collective microbenchmarks show no cost per byte: use larger sizes");
  const auto rate = [](double us_per_byte) {
    return us_per_byte > 0 ? 1.0 / (us_per_byte * kBytesPerGBpsUs) : std::numeric_limits<double>::infinity();
  };
  return {x[0], x[1], rate(x[2]), rate(x[3])};
}

}  // namespace coconet::validation
