// The machine-speed check (validation/machine_speed.h): the reference line
// written by calibrate and read back, the checks it gives, and the warning
// past the tolerance (shown able to fire, and silent within it).
#include <gtest/gtest.h>

#include "validation/machine_speed.h"

namespace coconet::validation {
namespace {

MicroSample sample(const std::string& label, double us) {
  MicroSample s;
  s.label = label;
  s.measured_us = us;
  return s;
}

TEST(ValidationSpeed, RoundTripsThroughTheTopologyText) {
  const std::vector<MicroSample> measured = {sample("add f32 N=1024", 2.0), sample("add f32 N=65536", 96.8),
                                             sample("8 fma f32 N=65536", 984.0),
                                             sample("allreduce f16 N=65536", 30.9)};
  const std::string line = speed_comment(measured, 2);
  EXPECT_EQ(line, std::string(kSpeedComment) + " ranks=2 memory=96.8 arithmetic=984 collective=30.9\n");
  const auto back = parse_speed("name: x\n# other comment\n" + line);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ranks, 2);
  EXPECT_DOUBLE_EQ(back->us.at("memory"), 96.8);
  EXPECT_DOUBLE_EQ(back->us.at("collective"), 30.9);
  EXPECT_EQ(back->us.size(), 3u);
  // No reference among the samples: no line; a topology without one: nothing.
  EXPECT_EQ(speed_comment({sample("add f32 N=1024", 2.0)}, 2), "");
  EXPECT_FALSE(parse_speed("name: x\n# hand-written\n").has_value());
  // A damaged value is left out; a line with no ranks or no value reads as none.
  const auto damaged = parse_speed(std::string(kSpeedComment) + " ranks=2 memory=abc arithmetic=-1 collective=30\n");
  ASSERT_TRUE(damaged.has_value());
  EXPECT_EQ(damaged->us.size(), 1u);
  EXPECT_FALSE(parse_speed(std::string(kSpeedComment) + " memory=96\n").has_value());
  EXPECT_FALSE(parse_speed(std::string(kSpeedComment) + " ranks=2 unknown=3\n").has_value());
  EXPECT_FALSE(parse_speed(std::string(kSpeedComment) + " ranks=1e300 memory=96\n").has_value());
}

TEST(ValidationSpeed, WarnsOnlyPastTheTolerance) {
  CalibratedSpeed then{2, {{"memory", 100.0}, {"collective", 30.0}}};
  const auto checks = speed_checks(then, {{"memory", 104.0}, {"collective", 31.0}},
                                   {{"memory", 97.0}, {"collective", 29.0}});
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].label, "add f32 N=65536");
  EXPECT_DOUBLE_EQ(checks[0].drift(), 0.0);  // 4% slower before, 3% faster after: opposite ways
  EXPECT_NEAR(checks[1].drift(), 0.0, 1e-12);
  EXPECT_EQ(speed_warning(checks), "");
  // 30% and more slower before and after the points: warned, with the figures.
  const auto slow = speed_checks(then, {{"memory", 135.0}}, {{"memory", 130.0}});
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_NEAR(slow[0].drift(), 0.30, 1e-12);
  const std::string w = speed_warning(slow);
  EXPECT_NE(w.find("add f32 N=65536 100.0 us when calibrated, 135.0 us before the points and 130.0 us after"),
            std::string::npos)
      << w;
  // A spell at one end alone is not warned about; faster counts as much as slower.
  EXPECT_EQ(speed_warning(speed_checks(then, {{"memory", 141.0}}, {{"memory", 101.0}})), "");
  EXPECT_NE(speed_warning(speed_checks(then, {{"memory", 60.0}}, {{"memory", 70.0}})), "");
  // A reference measured only once is not checked.
  EXPECT_TRUE(speed_checks(then, {{"memory", 100.0}}, {}).empty());
}

}  // namespace
}  // namespace coconet::validation
