// What `run` warns of on a loaded machine (exec/runtime.h loaded_spread):
// rows whose steps spread kLoadedSpread or more, and the worst of them.
#include <gtest/gtest.h>

#include <vector>

#include "exec/runtime.h"

namespace coconet::exec {
namespace {

RunRow row(const char* schedule, double min_us, double max_us) {
  RunRow r;
  r.schedule = schedule;
  r.min_us = min_us;
  r.max_us = max_us;
  r.median_us = min_us;
  return r;
}

TEST(LoadedSpread, CountsTheRowsPastTheSpreadAndNamesTheWorst) {
  const std::vector<RunRow> quiet{row("AR-C", 100, 130), row("RS-C-AG", 50, 50 * kLoadedSpread * 0.99)};
  EXPECT_EQ(loaded_spread(quiet).rows, 0);
  EXPECT_EQ(loaded_spread(quiet).worst, nullptr);
  const std::vector<RunRow> loaded{row("AR-C", 100, 130), row("RS-C-AG", 50, 50 * kLoadedSpread),
                                   row("fuse(AR-C)", 10, 30), row("empty", 0, 0)};
  const Spread s = loaded_spread(loaded);
  EXPECT_EQ(s.rows, 2);
  ASSERT_NE(s.worst, nullptr);
  EXPECT_EQ(s.worst->schedule, "fuse(AR-C)");  // 3x beats 2x
}

}  // namespace
}  // namespace coconet::exec
