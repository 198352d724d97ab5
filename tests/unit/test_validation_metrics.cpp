// Metric functions against hand-computed cases.
#include <cmath>

#include <gtest/gtest.h>

#include "model/error.h"
#include "model/schedule.h"
#include "validation/metrics.h"

namespace coconet::validation {
namespace {

ResultRow row(std::string w, std::string size, std::string sched, double pred, double meas, bool base = false) {
  ResultRow r;
  r.workload = std::move(w);
  r.size = std::move(size);
  r.schedule = std::move(sched);
  r.predicted_us = pred;
  r.measured = {meas, meas, meas};
  r.baseline = base;
  r.verified = true;
  return r;
}

TEST(ValidationMetrics, ErrorIsSignedRelativeToMeasured) {
  EXPECT_DOUBLE_EQ(row("w", "N=1", "A", 110, 100).error_pct(), 10.0);
  EXPECT_DOUBLE_EQ(row("w", "N=1", "A", 75, 100).error_pct(), -25.0);
}

// Two points, one kept from a slow spell (its rows 50% off): the metrics
// outside spells are the other point's alone; with no point or every point
// in a spell there are none.
TEST(ValidationMetrics, OutsideSpellsLeaveTheSpellsPointsOut) {
  std::vector<ResultRow> rows = {row("w", "N=1", "A", 110, 100, true), row("w", "N=1", "B", 90, 100),
                                 row("w", "N=2", "A", 100, 200, true), row("w", "N=2", "B", 100, 200)};
  EXPECT_FALSE(metrics_outside_spells(rows).has_value());
  rows[2].in_spell = rows[3].in_spell = true;
  const auto quiet = metrics_outside_spells(rows);
  ASSERT_TRUE(quiet.has_value());
  EXPECT_EQ(quiet->points, 1);
  EXPECT_EQ(quiet->rows, 2);
  EXPECT_DOUBLE_EQ(quiet->mape_pct, 10.0);
  EXPECT_DOUBLE_EQ(compute_metrics(rows).mape_pct, 30.0);  // every point's
  rows[0].in_spell = rows[1].in_spell = true;
  EXPECT_FALSE(metrics_outside_spells(rows).has_value());
}

// The model prices the fused op and its parts alike and picks the fused op
// (fewer stages); the parts run 0.5% faster. Strict top-1 counts the point
// (the model made no difference between them), the pick's own count and the
// regret do not; priced 1% apart, strict does not count it either.
TEST(ValidationMetrics, StrictTopOneCountsWhatThePredictionsCannotTellApart) {
  std::vector<ResultRow> rows = {row("w", "N=1", "A-B", 100, 201, true), row("w", "N=1", "fuse(A-B)", 100, 201),
                                 row("w", "N=1", "A-B-C", 150, 200), row("w", "N=1", "slow", 300, 300)};
  rows[0].schedule_stages = 2;
  rows[1].schedule_stages = 1;
  rows[2].schedule_stages = 3;
  rows[2].predicted_us = 100;  // priced alike with the pick
  const Metrics m = compute_metrics(rows);
  ASSERT_EQ(m.per_point.size(), 1u);
  const PointMetrics& p = m.per_point[0];
  EXPECT_EQ(p.predicted_best, "fuse(A-B)");
  EXPECT_EQ(p.predicted_best_set, (std::vector<std::string>{"A-B", "fuse(A-B)", "A-B-C"}));
  EXPECT_EQ(predicted_text(p), "fuse(A-B) (alike: A-B, A-B-C)");
  EXPECT_TRUE(p.fastest_in_predicted_set);
  EXPECT_FALSE(p.top1_strict);
  EXPECT_NEAR(p.regret_pct, 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(m.fastest_in_predicted_set, 1.0);
  EXPECT_DOUBLE_EQ(m.top1_strict, 0.0);
  rows[2].predicted_us = 101;  // 1% slower: a prediction that was wrong
  const PointMetrics q = compute_metrics(rows).per_point[0];
  EXPECT_FALSE(q.fastest_in_predicted_set);
  EXPECT_EQ(q.predicted_best_set, (std::vector<std::string>{"A-B", "fuse(A-B)"}));
  EXPECT_EQ(predicted_text(q), "fuse(A-B) (alike: A-B)");
}

TEST(ValidationMetrics, AverageRanksShareTies) {
  const std::vector<double> v = {10, 30, 20, 30};
  const auto r = average_ranks(v);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_DOUBLE_EQ(r[0], 1.0);
  EXPECT_DOUBLE_EQ(r[1], 3.5);
  EXPECT_DOUBLE_EQ(r[2], 2.0);
  EXPECT_DOUBLE_EQ(r[3], 3.5);
}

TEST(ValidationMetrics, SpearmanHandComputed) {
  // Same order: 1; reversed: -1.
  const std::vector<double> a = {1, 2, 3, 4};
  const std::vector<double> same = {10, 20, 35, 100};
  const std::vector<double> rev = {4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(*spearman(a, same), 1.0);
  EXPECT_DOUBLE_EQ(*spearman(a, rev), -1.0);
  // Ranks (1,2,3,4) vs (1,3,2,4): d^2 sum = 2, rho = 1 - 6*2/(4*15) = 0.8.
  const std::vector<double> swap = {1, 3, 2, 4};
  EXPECT_NEAR(*spearman(a, swap), 0.8, 1e-12);
  // With a tie: x ranks (1,2,3), y ranks (1.5,1.5,3): Pearson of ranks = 0.8660254.
  const std::vector<double> x = {1, 2, 3};
  const std::vector<double> y = {5, 5, 9};
  EXPECT_NEAR(*spearman(x, y), std::sqrt(3.0) / 2.0, 1e-12);
}

TEST(ValidationMetrics, SpearmanUndefinedCases) {
  const std::vector<double> one = {1};
  EXPECT_FALSE(spearman(one, one).has_value());
  const std::vector<double> a = {1, 2, 3};
  const std::vector<double> flat = {7, 7, 7};
  EXPECT_FALSE(spearman(a, flat).has_value());
  const std::vector<double> shorter = {1, 2};
  EXPECT_THROW((void)spearman(a, shorter), InternalError);
}

// Two points. Point 1 (sgd N=1): predicted best B (90), measured best B (80): top-1.
// Point 2 (sgd N=2): predicted best B (150), measured best A (200) while B ran 220:
// regret = 220/200 - 1 = 10%.
std::vector<ResultRow> two_points() {
  return {row("sgd", "N=1", "A", 100, 100, true), row("sgd", "N=1", "B", 90, 80),
          row("sgd", "N=2", "A", 200, 200, true), row("sgd", "N=2", "B", 150, 220)};
}

TEST(ValidationMetrics, AggregatesHandComputed) {
  const auto rows = two_points();
  const Metrics m = compute_metrics(rows);
  // |errors|: 0, 12.5, 0, 31.818...; MAPE = 44.318.../4.
  const double e4 = std::abs(150.0 - 220.0) / 220.0 * 100;
  EXPECT_NEAR(m.mape_pct, (12.5 + e4) / 4, 1e-9);
  EXPECT_NEAR(m.max_error_pct, e4, 1e-9);
  EXPECT_EQ(m.points, 2);
  EXPECT_EQ(m.rows, 4);
  EXPECT_DOUBLE_EQ(m.fastest_in_predicted_set, 0.5);
  EXPECT_NEAR(m.regret_pct, 10.0, 1e-9);
  EXPECT_NEAR(m.mean_regret_pct, 10.0, 1e-9);
  // Spearman per point: point 1 same order (1), point 2 reversed (-1); mean 0.
  ASSERT_TRUE(m.spearman.has_value());
  EXPECT_NEAR(*m.spearman, 0.0, 1e-12);
  ASSERT_EQ(m.per_point.size(), 2u);
  EXPECT_TRUE(m.per_point[0].fastest_in_predicted_set);
  EXPECT_EQ(m.per_point[1].predicted_best, "B");
  EXPECT_EQ(m.per_point[1].measured_best, "A");
  EXPECT_NEAR(m.per_point[0].speedup_predicted, 100.0 / 90.0, 1e-12);
  EXPECT_NEAR(m.per_point[0].speedup_measured, 100.0 / 80.0, 1e-12);
  EXPECT_NEAR(m.per_point[1].speedup_of_pick_measured, 200.0 / 220.0, 1e-12);
}

TEST(ValidationMetrics, PerfectPredictionsScorePerfectly) {
  std::vector<ResultRow> rows = {row("w", "N=1", "A", 100, 100, true), row("w", "N=1", "B", 50, 50),
                                 row("w", "N=1", "C", 70, 70)};
  const Metrics m = compute_metrics(rows);
  EXPECT_DOUBLE_EQ(m.mape_pct, 0);
  EXPECT_DOUBLE_EQ(m.fastest_in_predicted_set, 1);
  EXPECT_DOUBLE_EQ(m.regret_pct, 0);
  EXPECT_DOUBLE_EQ(*m.spearman, 1);
}

// Negative: a wrong pick must show up as disagreement and regret.
TEST(ValidationMetrics, WrongPickIsCaught) {
  std::vector<ResultRow> rows = {row("w", "N=1", "A", 10, 100, true), row("w", "N=1", "B", 50, 50)};
  const Metrics m = compute_metrics(rows);
  EXPECT_DOUBLE_EQ(m.fastest_in_predicted_set, 0);
  EXPECT_DOUBLE_EQ(m.regret_pct, 100);
}

TEST(ValidationMetrics, NonPositiveMeasurementIsAnInternalError) {
  std::vector<ResultRow> rows = {row("w", "N=1", "A", 10, 0)};
  EXPECT_THROW((void)compute_metrics(rows), InternalError);
}


ResultRow noisy(std::string sched, double pred, double meas, double lo, double hi, bool base = false) {
  ResultRow r = row("w", "N=1", std::move(sched), pred, meas, base);
  r.measured.ci_lo_us = lo;
  r.measured.ci_hi_us = hi;
  r.measured.samples = 10;
  return r;
}

TEST(ValidationMetrics, PickTiedWithTheFastestIsInTheMeasuredBestSet) {
  // B is predicted best; A's median is faster but the intervals overlap: strict top-1 fails, the set holds B.
  const std::vector<ResultRow> rows = {noisy("A", 120, 100, 95, 106, true), noisy("B", 90, 103, 99, 108),
                                       noisy("C", 150, 140, 135, 146)};
  const Metrics m = compute_metrics(rows);
  const auto& p = m.per_point.at(0);
  EXPECT_FALSE(p.fastest_in_predicted_set);
  EXPECT_TRUE(p.top1_in_set);
  EXPECT_EQ(p.measured_best_set, (std::vector<std::string>{"A", "B"}));
  EXPECT_DOUBLE_EQ(m.fastest_in_predicted_set, 0.0);
  EXPECT_DOUBLE_EQ(m.top1_in_set, 1.0);
  EXPECT_NEAR(p.regret_pct, 3.0, 1e-9);
  // Regret interval: [max(0, 99/106 - 1), 108/95 - 1].
  EXPECT_DOUBLE_EQ(p.regret_ci.lo, 0.0);
  EXPECT_NEAR(p.regret_ci.hi, (108.0 / 95.0 - 1) * 100, 1e-9);
}

TEST(ValidationMetrics, PickClearlySlowerIsOutsideTheSet) {
  // Intervals under 0.5% of their medians (stats.h kDecisiveWidth): decided.
  const std::vector<ResultRow> rows = {noisy("A", 120, 100, 99.8, 100.2, true), noisy("B", 90, 150, 149.7, 150.3)};
  const Metrics m = compute_metrics(rows);
  EXPECT_FALSE(m.per_point.at(0).top1_in_set);
  EXPECT_DOUBLE_EQ(m.top1_in_set, 0.0);
  EXPECT_NEAR(m.regret_ci.lo, (149.7 / 100.2 - 1) * 100, 1e-9);
  EXPECT_NEAR(m.regret_ci.hi, (150.3 / 99.8 - 1) * 100, 1e-9);
  EXPECT_EQ(m.undecided_points, 0);
}

TEST(ValidationMetrics, MapeIntervalBracketsTheMape) {
  // A: predicted 100 inside [90, 110]: |error| from 0 to 11.1%. B: predicted 50 below [80, 120]: 37.5% to 58.3%.
  const std::vector<ResultRow> rows = {noisy("A", 100, 100, 90, 110), noisy("B", 50, 100, 80, 120)};
  const Metrics m = compute_metrics(rows);
  EXPECT_NEAR(m.mape_ci.lo, (0 + 37.5) / 2, 1e-9);
  EXPECT_NEAR(m.mape_ci.hi, (10.0 / 90 * 100 + 70.0 / 120 * 100) / 2, 1e-9);
  EXPECT_LE(m.mape_ci.lo, m.mape_pct);
  EXPECT_GE(m.mape_ci.hi, m.mape_pct);
  // Intervals of 20-40% of the median are too wide to decide.
  EXPECT_EQ(m.undecided_points, 1);
}

TEST(ValidationMetrics, RowsWithoutIntervalsUseTheirMedians) {
  const std::vector<ResultRow> rows = {row("w", "N=1", "A", 10, 10), row("w", "N=1", "B", 12, 10.5)};
  const Metrics m = compute_metrics(rows);
  EXPECT_EQ(m.per_point.at(0).measured_best_set, (std::vector<std::string>{"A"}));
  EXPECT_DOUBLE_EQ(m.mape_ci.lo, m.mape_pct);
  EXPECT_DOUBLE_EQ(m.mape_ci.hi, m.mape_pct);
}

// Equal predictions: the model's pick is the schedule with fewer stages
// (model::predicted_best), wherever it is listed; unequal ones: the faster.
TEST(ValidationMetrics, EqualPredictionsPickTheFewestStages) {
  std::vector<ResultRow> rows{row("sgd", "N=4", "AR-C", 10.0, 12.0, true), row("sgd", "N=4", "fuse(AR-C)", 10.0, 11.0)};
  rows[0].schedule_stages = 2;
  rows[1].schedule_stages = 1;
  Metrics m = compute_metrics(rows);
  ASSERT_EQ(m.per_point.size(), 1u);
  EXPECT_EQ(m.per_point[0].predicted_best, "fuse(AR-C)");
  EXPECT_DOUBLE_EQ(m.regret_pct, 0.0);
  rows[1].predicted_us = 10.5;  // no longer a tie: the faster prediction wins, stages or not
  m = compute_metrics(rows);
  EXPECT_EQ(m.per_point[0].predicted_best, "AR-C");
  const std::vector<std::size_t> stages{5, 3, 1};
  EXPECT_EQ(model::predicted_best(std::vector<double>{1.0, 1.0 + 1e-6, 2.0}, stages), 0u);  // faster wins
  EXPECT_EQ(model::predicted_best(std::vector<double>{1.0, 1.0 + 1e-12, 1.0 + 2e-12}, stages), 2u);  // fewest stages
  // Alike means alike the fastest: 1 + 0.6e-9 and 1 + 1.2e-9 are not both "equal" in a chain.
  EXPECT_EQ(model::predicted_best(std::vector<double>{1.0, 1.0 + 0.6e-9, 1.0 + 1.2e-9}, stages), 1u);
  EXPECT_EQ(model::predicted_best(std::vector<double>{}, std::vector<std::size_t>{}), 0u);
}

}  // namespace
}  // namespace coconet::validation
