// The progress (validation/progress.h) that validate, calibrate and
// `run --schedule all` show: the bar on a terminal, lines at a bounded rate elsewhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "validation/progress.h"

namespace coconet::validation {
namespace {

TEST(ValidationProgress, LineSaysDoneLeftElapsedAndWhat) {
  const std::string line = progress_line(3, 12, 75, "sgd N=4096 AR-C");
  EXPECT_EQ(line.rfind("[#######.......................] 3/12, 9 left, 1:15 sgd N=4096 AR-C", 0), 0u) << line;
  EXPECT_EQ(progress_line(12, 12, 5, "x").rfind("[##############################] 12/12, 0 left, 0:05 x", 0), 0u);
  // A long label is cut, so the line keeps one width and \r redraws it whole.
  const std::string a = progress_line(0, 4, 0, std::string(200, 'a'));
  const std::string b = progress_line(0, 4, 0, "b");
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(progress_line(9, 4, 0, "").find("9/4, 0 left"), 33u);  // more done than planned: a full bar, none left
}

TEST(ValidationProgress, SilentWhenDisabled) {
  testing::internal::CaptureStderr();
  {
    Progress p(false, 3);
    p.note("first");
    p.step("first");
    p.finish();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  {
    Progress p(true, 2);
    p.step("sgd N=4096 AR-C");
  }
  const std::string drawn = testing::internal::GetCapturedStderr();
  EXPECT_NE(drawn.find("\r[###############...............] 1/2, 1 left, 0:00 sgd N=4096 AR-C"), std::string::npos) << drawn;
}

// Without a terminal: whole lines, at most one per period and none before
// the first period has passed; a period of 0 prints each step, a long one
// none, and a finished run whose log was told it goes on is told it ended.
TEST(ValidationProgress, LinesAtABoundedRateWithoutATerminal) {
  EXPECT_EQ(progress_text_line(3, 12, 75, "sgd N=4096 AR-C"), "coconet: 3/12 done, 9 left, 1:15 elapsed: sgd N=4096 AR-C");
  testing::internal::CaptureStderr();
  {
    Progress p(ProgressStyle::lines, 3, 0.0);
    p.step("a");
    p.step("b");
    p.finish();
  }
  const std::string each = testing::internal::GetCapturedStderr();
  EXPECT_EQ(each,
            "coconet: 1/3 done, 2 left, 0:00 elapsed: a\n"
            "coconet: 2/3 done, 1 left, 0:00 elapsed: b\n"
            "coconet: 2/3 done, 1 left, 0:00 elapsed: finished\n");
  EXPECT_EQ(each.find('\r'), std::string::npos) << "no carriage returns in a log";
  testing::internal::CaptureStderr();
  {
    Progress p(ProgressStyle::lines, 100, 3600.0);
    for (int i = 0; i < 100; ++i) p.step("x");
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "nothing before the first period has passed";
  // Under ctest stderr is a pipe and the launcher variable is unset: lines.
  ::unsetenv(kProgressEnv);
  if (::isatty(STDERR_FILENO) == 0) {
    EXPECT_EQ(progress_style(), ProgressStyle::lines);
  }
  ::setenv(kProgressEnv, "1", 1);
  EXPECT_EQ(progress_style(), ProgressStyle::bar);
  ::unsetenv(kProgressEnv);
}

TEST(ValidationProgress, WantedOnlyForATerminal) {
  // Unset, whether stderr is a terminal decides (under ctest a pipe); the launcher's word decides otherwise.
  ::unsetenv(kProgressEnv);
  EXPECT_EQ(progress_wanted(), ::isatty(STDERR_FILENO) != 0);
  ::setenv(kProgressEnv, "0", 1);
  EXPECT_FALSE(progress_wanted());
  ::setenv(kProgressEnv, "1", 1);
  EXPECT_TRUE(progress_wanted());
  ::unsetenv(kProgressEnv);
}

}  // namespace
}  // namespace coconet::validation
