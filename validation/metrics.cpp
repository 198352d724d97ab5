// Metric formulas. Spearman is Pearson's correlation of average ranks, which
// handles ties exactly (two schedules measured equal share a rank).
#include "validation/metrics.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

#include "model/error.h"
#include "model/schedule.h"

namespace coconet::validation {

namespace {
constexpr double kPercent = 100.0;

double pearson(std::span<const double> a, std::span<const double> b, bool& defined) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cov += (a[i] - ma) * (b[i] - mb);
    va += (a[i] - ma) * (a[i] - ma);
    vb += (b[i] - mb) * (b[i] - mb);
  }
  defined = va > 0 && vb > 0;
  return defined ? cov / std::sqrt(va * vb) : 0.0;
}

const ResultRow& fastest(std::span<const ResultRow> rows, bool predicted) {
  if (predicted)  // the model's pick (model::predicted_best)
    return rows[model::predicted_best_of(rows, [](const ResultRow& r) { return r.predicted_us; },
                                         [](const ResultRow& r) { return r.schedule_stages; })];
  return *std::min_element(rows.begin(), rows.end(), [](const ResultRow& x, const ResultRow& y) {
    return x.measured.median_us < y.measured.median_us;
  });
}

const ResultRow& baseline_of(std::span<const ResultRow> rows) {
  for (const auto& r : rows)
    if (r.baseline) return r;
  return rows.front();  // no baseline marked: the first schedule listed stands in
}

PointMetrics point_metrics(const PointKey& key, std::span<const ResultRow> rows) {
  PointMetrics m;
  m.key = key;
  m.schedules = static_cast<int>(rows.size());
  const ResultRow& pbest = fastest(rows, true);
  const ResultRow& mbest = fastest(rows, false);
  m.predicted_best = pbest.schedule;
  m.measured_best = mbest.schedule;
  m.top1_strict = pbest.measured.median_us <= mbest.measured.median_us;
  std::vector<double> predicted;
  for (const auto& r : rows) predicted.push_back(r.predicted_us);
  for (const std::size_t i : model::predicted_alike(predicted)) {
    m.predicted_best_set.push_back(rows[i].schedule);
    m.fastest_in_predicted_set = m.fastest_in_predicted_set || rows[i].measured.median_us <= mbest.measured.median_us;
  }
  m.regret_pct = (pbest.measured.median_us / mbest.measured.median_us - 1.0) * kPercent;
  std::vector<MedianEstimate> est;
  for (const auto& r : rows) est.push_back(r.measured.estimate());
  for (const std::size_t i : measured_best_set(est)) m.measured_best_set.push_back(rows[i].schedule);
  m.top1_in_set = m.top1_strict || std::find(m.measured_best_set.begin(), m.measured_best_set.end(), pbest.schedule) !=
                                m.measured_best_set.end();
  m.decided = decided(est, static_cast<std::size_t>(&pbest - rows.data()));
  const Interval pick = pbest.measured.estimate().ci, best = mbest.measured.estimate().ci;
  m.regret_ci = {std::max(0.0, pick.lo / best.hi - 1.0) * kPercent, std::max(0.0, pick.hi / best.lo - 1.0) * kPercent};
  std::vector<double> pred, meas;
  double abs_err = 0;
  for (const auto& r : rows) {
    pred.push_back(r.predicted_us);
    meas.push_back(r.measured.median_us);
    abs_err += std::abs(r.error_pct());
  }
  m.mape_pct = abs_err / static_cast<double>(rows.size());
  m.spearman = spearman(pred, meas);
  const ResultRow& base = baseline_of(rows);
  m.speedup_predicted = base.predicted_us / pbest.predicted_us;
  m.speedup_measured = base.measured.median_us / mbest.measured.median_us;
  m.speedup_of_pick_measured = base.measured.median_us / pbest.measured.median_us;
  return m;
}

// |predicted - m| / m over m in [lo, hi]: smallest at the end nearest the
// prediction (0 inside), largest at the farther end (monotone on each side).
Interval abs_error_range(double predicted, const Interval& m) {
  auto e = [&](double x) { return std::abs(predicted - x) / x * kPercent; };
  const double lo = m.contains(predicted) ? 0.0 : std::min(e(m.lo), e(m.hi));
  return {lo, std::max(e(m.lo), e(m.hi))};
}
}  // namespace

MedianEstimate Measurement::estimate() const {
  MedianEstimate e;
  e.median = median_us;
  e.samples = samples;
  e.ci = samples > 0 ? Interval{ci_lo_us, ci_hi_us} : Interval{median_us, median_us};
  return e;
}

double ResultRow::error_pct() const {
  COCONET_ASSERT(measured.median_us > 0, "error_pct of a row without a positive measured time");
  return (predicted_us - measured.median_us) / measured.median_us * kPercent;
}

std::vector<double> average_ranks(std::span<const double> v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  std::size_t i = 0;
  while (i < order.size()) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double shared = (static_cast<double>(i + 1) + static_cast<double>(j + 1)) / 2.0;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = shared;
    i = j + 1;
  }
  return ranks;
}

std::optional<double> spearman(std::span<const double> a, std::span<const double> b) {
  COCONET_ASSERT(a.size() == b.size(), "spearman of series of different lengths");
  if (a.size() < 2) return std::nullopt;
  const auto ra = average_ranks(a);
  const auto rb = average_ranks(b);
  bool defined = false;
  const double r = pearson(ra, rb, defined);
  if (!defined) return std::nullopt;
  return r;
}

std::vector<PointKey> points_of(std::span<const ResultRow> rows) {
  std::vector<PointKey> keys;
  for (const auto& r : rows) {
    const PointKey k{r.workload, r.size};
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  return keys;
}

std::string predicted_text(const PointMetrics& p) {
  std::string alike;
  for (const auto& s : p.predicted_best_set)
    if (s != p.predicted_best) alike += (alike.empty() ? "" : ", ") + s;
  return alike.empty() ? p.predicted_best : p.predicted_best + " (alike: " + alike + ")";
}

std::optional<Metrics> metrics_outside_spells(std::span<const ResultRow> rows) {
  std::vector<ResultRow> quiet;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(quiet), [](const ResultRow& r) { return !r.in_spell; });
  if (quiet.empty() || quiet.size() == rows.size()) return std::nullopt;
  return compute_metrics(quiet);
}

std::vector<ResultRow> rows_of(std::span<const ResultRow> rows, const PointKey& key) {
  std::vector<ResultRow> out;
  for (const auto& r : rows)
    if (r.workload == key.workload && r.size == key.size) out.push_back(r);
  return out;
}

Metrics compute_metrics(std::span<const ResultRow> rows) {
  Metrics m;
  m.rows = static_cast<int>(rows.size());
  if (rows.empty()) return m;
  double abs_sum = 0;
  for (const auto& r : rows) {
    const double e = std::abs(r.error_pct());
    abs_sum += e;
    m.max_error_pct = std::max(m.max_error_pct, e);
    const Interval range = abs_error_range(r.predicted_us, r.measured.estimate().ci);
    m.mape_ci.lo += range.lo / static_cast<double>(rows.size());
    m.mape_ci.hi += range.hi / static_cast<double>(rows.size());
  }
  m.mape_pct = abs_sum / static_cast<double>(rows.size());
  int agree = 0, pick_agrees = 0, in_set = 0, disagree = 0, with_rho = 0;
  double rho_sum = 0, regret_sum = 0;
  for (const auto& key : points_of(rows)) {
    const auto pr = rows_of(rows, key);
    PointMetrics pm = point_metrics(key, pr);
    if (pm.top1_in_set) ++in_set;
    if (!pm.decided) ++m.undecided_points;
    m.regret_ci.lo = std::max(m.regret_ci.lo, pm.regret_ci.lo);
    m.regret_ci.hi = std::max(m.regret_ci.hi, pm.regret_ci.hi);
    if (pm.fastest_in_predicted_set) ++agree;
    if (pm.top1_strict) ++pick_agrees;
    else {
      ++disagree;
      regret_sum += pm.regret_pct;
    }
    m.regret_pct = std::max(m.regret_pct, pm.regret_pct);
    if (pm.spearman) {
      rho_sum += *pm.spearman;
      ++with_rho;
    }
    m.per_point.push_back(std::move(pm));
  }
  m.points = static_cast<int>(m.per_point.size());
  m.fastest_in_predicted_set = static_cast<double>(agree) / m.points;
  m.top1_strict = static_cast<double>(pick_agrees) / m.points;
  m.top1_in_set = static_cast<double>(in_set) / m.points;
  m.mean_regret_pct = disagree ? regret_sum / disagree : 0.0;
  if (with_rho) m.spearman = rho_sum / with_rho;
  return m;
}

}  // namespace coconet::validation
