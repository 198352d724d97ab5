// A step's shares (exec/step_shares.h) for two ranks, computed by hand, on a
// common clock and on the ranks' own counts: the shares add up to the step,
// and a rank's late start is charged where each clock puts it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "exec/step_shares.h"

namespace coconet::exec {
namespace {

// What the runtime's max over ranks gives.
std::vector<double> max_over(const std::vector<std::vector<double>>& ranks) {
  std::vector<double> out = ranks.at(0);
  for (const auto& r : ranks)
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::max(out[i], r.at(i));
  return out;
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// Rank 0 starts at 0 and runs 10 then 5 us; rank 1 starts 3 us later and
// runs 4 then 20 (it waited for rank 0 in its second unit, say).
const std::vector<double> kRank0 = {10.0, 5.0};
const std::vector<double> kRank1 = {4.0, 20.0};

TEST(StepShares, CommonClock) {
  const auto reduced = max_over({step_share_terms(kRank0, 0.0, true), step_share_terms(kRank1, 3.0, true)});
  ASSERT_EQ(reduced.size(), 4u);  // own-count ends, then common-clock ends
  const StepShares s = step_shares(reduced, 2, true);
  EXPECT_DOUBLE_EQ(s.step, 24.0);  // rank 1's own count: 4 + 20
  ASSERT_EQ(s.units.size(), 2u);
  // Latest ends on the common clock: 10 (rank 0) and 27 (rank 1): the second
  // unit 17; the first takes the rest of the step.
  EXPECT_DOUBLE_EQ(s.units[1], 17.0);
  EXPECT_DOUBLE_EQ(s.units[0], 7.0);
  EXPECT_DOUBLE_EQ(sum(s.units), s.step);
}

TEST(StepShares, OwnClocks) {
  const auto reduced = max_over({step_share_terms(kRank0, 0.0, false), step_share_terms(kRank1, 1e6, false)});
  ASSERT_EQ(reduced.size(), 2u);  // the starts do not compare: left out
  const StepShares s = step_shares(reduced, 2, false);
  EXPECT_DOUBLE_EQ(s.step, 24.0);
  ASSERT_EQ(s.units.size(), 2u);
  // Latest own-count ends 10 and 24.
  EXPECT_DOUBLE_EQ(s.units[0], 10.0);
  EXPECT_DOUBLE_EQ(s.units[1], 14.0);
  EXPECT_DOUBLE_EQ(sum(s.units), s.step);
}

TEST(StepShares, NoUnits) {
  const StepShares s = step_shares(step_share_terms({}, 5.0, true), 0, true);
  EXPECT_DOUBLE_EQ(s.step, 0.0);
  EXPECT_TRUE(s.units.empty());
}

}  // namespace
}  // namespace coconet::exec
