// The progress bar (validation/progress.h) that validate, calibrate and
// `run --schedule all` draw on a terminal: its line, and silence elsewhere.
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
