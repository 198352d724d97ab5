// The measurement statistics (validation/stats.h): intervals from order
// statistics against hand-computed binomial tails, and tie tests that can fail.
#include <vector>

#include <gtest/gtest.h>

#include "model/error.h"
#include "validation/stats.h"

namespace coconet::validation {
namespace {

std::vector<double> ramp(double from, double step, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(from + step * i);
  return v;
}

TEST(ValidationStats, TenSamplesUseTheSecondAndNinthOrderStatistics) {
  // P(B <= 1) = 11/1024 <= 2.5% < P(B <= 2) = 56/1024: [x(1), x(8)], coverage 1 - 22/1024.
  const std::vector<double> v = {9, 1, 8, 2, 7, 3, 6, 4, 5, 10};
  const auto e = median_interval(v);
  EXPECT_DOUBLE_EQ(e.median, 5.5);
  EXPECT_DOUBLE_EQ(e.ci.lo, 2);
  EXPECT_DOUBLE_EQ(e.ci.hi, 9);
  EXPECT_NEAR(e.coverage, 1.0 - 22.0 / 1024.0, 1e-12);
  EXPECT_EQ(e.samples, 10);
}

TEST(ValidationStats, FewSamplesFallBackToMinAndMaxWithTheirCoverage) {
  const std::vector<double> v = {3, 1, 2};
  const auto e = median_interval(v);
  EXPECT_DOUBLE_EQ(e.ci.lo, 1);
  EXPECT_DOUBLE_EQ(e.ci.hi, 3);
  EXPECT_NEAR(e.coverage, 0.75, 1e-12);  // 1 - 2 * 2^-3
  const std::vector<double> one = {4};
  const auto o = median_interval(one);
  EXPECT_DOUBLE_EQ(o.ci.lo, 4);
  EXPECT_DOUBLE_EQ(o.ci.hi, 4);
}

TEST(ValidationStats, IntervalNarrowsWithMoreSamples) {
  const auto small = median_interval(ramp(100, 1, 10));
  const auto large = median_interval(ramp(100, 0.1, 100));  // same spread, ten times the samples
  EXPECT_LT(large.relative_width(), small.relative_width());
  EXPECT_GE(large.coverage, kConfidence);
  EXPECT_TRUE(large.ci.contains(large.median));
}

TEST(ValidationStats, NoSamplesIsABug) {
  const std::vector<double> none;
  EXPECT_THROW((void)median_interval(none), InternalError);
}

TEST(ValidationStats, ClearlySeparatedPairIsNotATie) {
  const auto fast = median_interval(ramp(100, 1, 12));
  const auto slow = median_interval(ramp(150, 1, 12));
  EXPECT_FALSE(indistinguishable(fast, slow));
  const std::vector<MedianEstimate> both = {slow, fast};
  const auto set = measured_best_set(both);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set[0], 1u);
}

TEST(ValidationStats, IdenticalSamplesAreATie) {
  const auto a = median_interval(ramp(100, 1, 12));
  const auto b = median_interval(ramp(100, 1, 12));
  EXPECT_TRUE(indistinguishable(a, b));
  const std::vector<MedianEstimate> both = {a, b};
  EXPECT_EQ(measured_best_set(both).size(), 2u);
}

TEST(ValidationStats, InterleavedNoisySamplesAreATie) {
  // Medians 104.5 and 105.5, each spread over 100..111: no difference shown.
  const std::vector<double> a = {100, 102, 104, 106, 108, 110, 101, 103, 105, 107};
  const std::vector<double> b = {101, 103, 105, 107, 109, 111, 102, 104, 106, 108};
  EXPECT_TRUE(indistinguishable(median_interval(a), median_interval(b)));
}

TEST(ValidationStats, WideIntervalsDoNotDecide) {
  // Two overlapping schedules, one with an interval 50% of its median: more rounds are needed.
  const auto wide = median_interval(ramp(80, 5, 10));   // 80..125
  const auto other = median_interval(ramp(95, 1, 10));  // 95..104
  const std::vector<MedianEstimate> v = {wide, other};
  EXPECT_FALSE(decided(v, 1));
  // A narrow tie decides, and so does a wide schedule that is clearly slower.
  const auto narrow = median_interval(ramp(100, 0.05, 10));  // 100..100.45: narrower than kDecisiveWidth
  const auto slow_wide = median_interval(ramp(200, 10, 10));
  const std::vector<MedianEstimate> w = {narrow, median_interval(ramp(100.2, 0.05, 10)), slow_wide};
  EXPECT_TRUE(decided(w, 1));
  // ... unless the model picked the wide slow one: its regret rests on its median.
  EXPECT_FALSE(decided(w, 2));
  EXPECT_TRUE(decided(w, 0));
  // A tie of intervals a few percent wide is not decided: which of two close
  // schedules is faster needs narrower ones.
  const std::vector<MedianEstimate> close = {median_interval(ramp(100, 0.5, 10)), median_interval(ramp(100.2, 0.5, 10))};
  EXPECT_FALSE(decided(close, 0));
  EXPECT_TRUE(decided(close, 0, 0.05));
}

}  // namespace
}  // namespace coconet::validation
