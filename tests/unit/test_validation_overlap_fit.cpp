// The overlap constants calibrate fits (nccl.sms_per_channel and
// nccl.interference) recovered from synthetic measurements: the overlapped
// microbenchmarks simulated on a topology with known constants, then fitted.
#include <cmath>

#include <gtest/gtest.h>

#include "sim/simulator.h"
#include "validation/calibrate.h"
#include "validation/microbench.h"

namespace coconet::validation {
namespace {

// A plausible CPU fit for the other constants (rates of a few GB/s and GFLOP/s).
Fitted cpu_like() {
  Fitted f;
  f.elementwise = {5.0, 8.0, 4.0, 1};
  f.gemm_f16_GFLOPs = 20;
  f.gemm_bf16_GFLOPs = 20;
  f.collectives = {30.0, 4.0, 3.0, 6.0};
  return f;
}

// The overlapped samples of a 2-rank plan, "measured" on `f` with the given constants.
std::vector<MicroSample> measured_with(const Fitted& f, double units, double interference) {
  std::vector<MicroSample> out;
  for (auto& s : microbenchmark_plan(2, MicroOptions{}))
    if (s.kind == MicroKind::overlap) out.push_back(s);
  sim::Topology t = sim::parse_topology(topology_yaml(f, CalibrateOptions{}, "cpu", 2), "<synthetic>");
  t.nccl.sms_per_channel = units;
  t.nccl.interference = interference;
  for (auto& s : out) s.measured_us = sim::simulate(s.schedule, sim::Context{t, s.ranks, s.sizes}).time_us;
  return out;
}

constexpr double kGridStep = 1.0 / 40;  // fit_scalar's grid over [0, 1]

TEST(OverlapFit, RecoversInterferenceAndUnits) {
  const Fitted f = cpu_like();
  for (const double truth : {0.0, 0.25, 0.5}) {
    const std::vector<MicroSample> s = measured_with(f, 0.5, truth);
    ASSERT_FALSE(s.empty());
    const OverlapFit fit = fit_overlap(s, f);
    EXPECT_NEAR(fit.interference, truth, kGridStep + 1e-9) << "interference " << truth;
    EXPECT_NEAR(fit.sms_per_channel, 0.5, kGridStep + 1e-9) << "interference " << truth;
  }
}

// The fit follows the data: measurements made with interference are not
// fitted as none, and none is not fitted as some.
TEST(OverlapFit, DifferentMeasurementsGiveDifferentFits) {
  const Fitted f = cpu_like();
  EXPECT_GT(fit_overlap(measured_with(f, 0.5, 0.5), f).interference, 0.3);
  EXPECT_LT(fit_overlap(measured_with(f, 0.5, 0.0), f).interference, 0.1);
  EXPECT_EQ(fit_overlap({}, f).interference, 0.0) << "no overlapped sample: none";
}

}  // namespace
}  // namespace coconet::validation
