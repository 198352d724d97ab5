// calibrate EXPERIMENT: the experiment's sizes join the sweep
// (validation/experiment_sizes.h), so that no op of any schedule of any of
// its points lies past the calibrated range.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/experiment.h"
#include "model/points.h"
#include "plan/capabilities.h"
#include "plan/step_plan.h"
#include "validation/calibrated_range.h"
#include "validation/experiment_sizes.h"
#include "tests/paths.h"

namespace coconet::validation {
namespace {

constexpr int kWorld = 2;

std::string cpu_local() { return coconet::test::source_root() + "/configs/experiments/cpu-local.yaml"; }

// Every op of every schedule of every point of the experiment past `r`.
std::vector<std::string> outside(const CalibratedRange& r) {
  const model::Experiment e = model::parse_experiment(model::read_file(cpu_local()), cpu_local());
  std::vector<std::string> out;
  for (const auto& pt : model::expand(e, model::PointOptions{{}, kWorld, std::nullopt, ""}))
    for (const auto& s : model::enumerate_schedules(pt.program))
      for (auto& o : beyond_range(plan::lower(s, pt.sizes, pt.ranks_per_group, plan::cpu_capabilities()), r))
        out.push_back(pt.program.name + " " + pt.label + " " + s.name() + ": " + o);
  return out;
}

TEST(ValidationSweep, ExperimentSizesCloseTheCalibratedRange) {
  MicroOptions o;
  o.quick = true;
  const CalibratedRange without = range_of(microbenchmark_plan(kWorld, o));
  EXPECT_FALSE(outside(without).empty());  // the sweep alone leaves cpu-local's largest ops out
  o.extra = experiment_sizes(cpu_local(), kWorld, plan::cpu_capabilities());
  EXPECT_FALSE(o.extra.collectives.empty());
  EXPECT_FALSE(o.extra.gemms.empty());
  const auto samples = microbenchmark_plan(kWorld, o);
  const auto past = outside(range_of(samples));
  EXPECT_TRUE(past.empty()) << past.front();
  // Megatron's allreduce at B = 4, S = 64, H = 128: 32768 f16 elements, measured as such.
  EXPECT_TRUE(std::any_of(samples.begin(), samples.end(),
                          [](const MicroSample& s) { return s.label == "allreduce f16 N=32768"; }));
  // No size is measured twice.
  for (std::size_t i = 0; i < samples.size(); ++i)
    for (std::size_t j = i + 1; j < samples.size(); ++j) EXPECT_NE(samples[i].label, samples[j].label);
}

TEST(ValidationSweep, BadExperimentIsAUserError) {
  EXPECT_THROW((void)experiment_sizes("no-such-experiment", kWorld, plan::cpu_capabilities()), UserError);
}

}  // namespace
}  // namespace coconet::validation
