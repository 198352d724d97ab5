// The measured timeline's Chrome trace (validation/measured_trace.h): one
// process per rank, one thread per stream, times from each rank's step start,
// readable by the report's own trace reader.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/parse.h"
#include "model/schedule.h"
#include "plan/capabilities.h"
#include "plan/step_plan.h"
#include "validation/measured_trace.h"
#include "validation/timeline.h"

namespace coconet::validation {
namespace {

TEST(ValidationTrace, OneProcessPerRankTimesFromEachRanksStart) {
  const auto p = model::parse_program(
      "name: t\nparams: {N: 1}\ntensors:\n  g: {dtype: f32, shape: [N], layout: local}\n"
      "program:\n  - s = allreduce(sum, g)\n  - y = s * 2\noutputs: [y]\n",
      "<test>");
  const plan::StepPlan plan = plan::lower(model::initial_schedule(p), p.bind({{"N", 1024}}), 2, plan::cpu_capabilities());
  ASSERT_EQ(plan.ops.size(), 2u);
  const std::vector<std::vector<exec::LaunchRecord>> records = {
      {{0, 0, plan::Stream::comm, 1000, 1010}, {1, 0, plan::Stream::compute, 1050, 1080}},
      {{0, 0, plan::Stream::comm, 5000, 5012}, {1, 0, plan::Stream::compute, 5040, 5075}}};
  const std::string json = measured_trace_json(plan, records, {1000, 5000}, "t");
  const auto doc = nlohmann::json::parse(json);
  EXPECT_EQ(doc["otherData"]["schema"], "coconet.trace-measured/1");
  EXPECT_DOUBLE_EQ(doc["otherData"]["time_us"].get<double>(), 80.0);
  const auto bars = timeline_from_trace(json);
  ASSERT_EQ(bars.size(), 4u);
  EXPECT_EQ(bars[0].lane, "rank 0 / comm");
  EXPECT_EQ(bars[0].name, plan.op(0).code);
  EXPECT_DOUBLE_EQ(bars[0].start_us, 0.0);
  EXPECT_DOUBLE_EQ(bars[0].duration_us, 10.0);
  EXPECT_EQ(bars[3].lane, "rank 1 / compute");
  EXPECT_DOUBLE_EQ(bars[3].start_us, 40.0);
  EXPECT_DOUBLE_EQ(bars[3].duration_us, 35.0);
}

}  // namespace
}  // namespace coconet::validation
