// The calibrated range (validation/calibrated_range.h): recorded in a
// topology's text, read back, and used to flag ops past it.
#include <gtest/gtest.h>

#include "model/parse.h"
#include "model/schedule.h"
#include "plan/capabilities.h"
#include "plan/step_plan.h"
#include "validation/calibrated_range.h"

namespace coconet::validation {
namespace {

plan::StepPlan allreduce_plan(std::int64_t n) {
  const auto p = model::parse_program(
      "name: t\nparams: {N: 1}\ntensors:\n  g: {dtype: f32, shape: [N], layout: local}\n"
      "program:\n  - s = allreduce(sum, g)\n  - y = s * 2\noutputs: [y]\n",
      "<test>");
  return plan::lower(model::initial_schedule(p), p.bind({{"N", n}}), 2, plan::cpu_capabilities());
}

TEST(ValidationRange, RoundTripsThroughTheTopologyText) {
  const CalibratedRange r{786432, 262144, 33554432};
  const std::string text = "name: x\n# other comment\n" + range_comment(r);
  const auto back = parse_range(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->elementwise_bytes, r.elementwise_bytes);
  EXPECT_DOUBLE_EQ(back->collective_bytes, r.collective_bytes);
  EXPECT_DOUBLE_EQ(back->gemm_flops, r.gemm_flops);
  EXPECT_FALSE(parse_range("name: x\n# hand-written\n").has_value());
}

TEST(ValidationRange, FlagsOnlyOpsPastTheRange) {
  const CalibratedRange r{1e12, 65536.0 * 4, 1e12};  // 2^16 f32 elements of collective
  EXPECT_TRUE(beyond_range(allreduce_plan(65536), r).empty());
  const auto past = beyond_range(allreduce_plan(65536 * 4), r);
  ASSERT_EQ(past.size(), 1u);
  EXPECT_NE(past[0].find("collective bytes"), std::string::npos) << past[0];
  // A kind with nothing calibrated is not checked.
  EXPECT_TRUE(beyond_range(allreduce_plan(65536 * 4), CalibratedRange{}).empty());
}

}  // namespace
}  // namespace coconet::validation
