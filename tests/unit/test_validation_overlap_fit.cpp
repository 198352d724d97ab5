// The overlap constants calibrate fits (nccl.sms_per_channel and
// nccl.interference) recovered from synthetic measurements: the overlapped
// microbenchmarks simulated on a topology with known constants, then fitted.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <gtest/gtest.h>

#include "sim/collective.h"
#include "sim/simulator.h"
#include "validation/calibrate.h"
#include "validation/fit.h"
#include "validation/microbench.h"

namespace coconet::validation {
namespace {

// A plausible CPU fit for the other constants (rates of a few GB/s and GFLOP/s).
Fitted cpu_like() {
  Fitted f;
  f.elementwise = {5.0, 8.0, 4.0, 1};
  f.gemm_f16.GFLOPs = 20;
  f.gemm_bf16.GFLOPs = 20;
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

// Each op its own share: allreduce and reduce-scatter measured with different
// shares of the core are fitted apart (the shared value lies between), and
// the file written carries them where the simulator reads them.
TEST(OverlapFit, EachOpItsOwnShare) {
  const Fitted f = cpu_like();
  std::vector<MicroSample> s;
  for (const auto& [op, units] : {std::pair{"allreduce", 0.25}, std::pair{"reducescatter", 0.9}})
    for (auto& x : measured_with(f, units, 0.0))
      if (x.op == op) s.push_back(x);
  ASSERT_EQ(s.size(), 4u);
  const OverlapFit fit = fit_overlap(s, f);
  ASSERT_EQ(fit.per_op.size(), 2u);
  EXPECT_NEAR(fit.per_op.at("allreduce"), 0.25, 2 * kGridStep) << "interference " << fit.interference;
  EXPECT_NEAR(fit.per_op.at("reducescatter"), 0.9, 2 * kGridStep) << "interference " << fit.interference;

  Fitted written = f;
  written.sms_per_channel = fit.sms_per_channel;
  written.op_sms_per_channel = fit.per_op;
  const sim::Topology t = sim::parse_topology(topology_yaml(written, CalibrateOptions{}, "cpu", 2), "<written>");
  const sim::Placement two = sim::place(t, 2);
  EXPECT_NEAR(sim::sms_per_channel(t, model::OpKind::allreduce, two), fit.per_op.at("allreduce"), 1e-3);
  EXPECT_NEAR(sim::sms_per_channel(t, model::OpKind::reducescatter, two), fit.per_op.at("reducescatter"), 1e-3);
  EXPECT_NEAR(sim::sms_per_channel(t, model::OpKind::allgather, two), t.nccl.sms_per_channel, 1e-12);
}

// The hand-off a fused op saves, recovered from fused microbenchmarks
// simulated with a known value; none without fused samples.
TEST(OverlapFit, RecoversTheHandoff) {
  Fitted f = cpu_like();
  std::vector<MicroSample> fused;
  for (auto& s : microbenchmark_plan(2, MicroOptions{}))
    if (s.kind == MicroKind::fused) fused.push_back(s);
  ASSERT_EQ(fused.size(), 2u);
  sim::Topology t = sim::parse_topology(topology_yaml(f, CalibrateOptions{}, "cpu", 2), "<synthetic>");
  for (const double truth : {0.0, 3.0}) {
    t.nccl.handoff_us = truth;
    for (auto& s : fused) s.measured_us = sim::simulate(s.schedule, sim::Context{t, s.ranks, s.sizes}).time_us;
    EXPECT_NEAR(fit_handoff(fused, f), truth, 10.0 / 40 + 1e-9) << truth;
  }
  EXPECT_EQ(fit_handoff({}, f), 0.0);
}

// gpu.copy recovered from one-rank allreduces simulated with known constants,
// written by topology_yaml and read back; the sweep makes each rank its own
// group at any world size; nothing without samples.
TEST(OverlapFit, RecoversTheLocalCopy) {
  for (const int world : {2, 4}) {
    std::vector<MicroSample> copies;
    for (auto& s : microbenchmark_plan(world, MicroOptions{}))
      if (s.kind == MicroKind::copy) copies.push_back(s);
    ASSERT_GE(copies.size(), 2u) << world;
    for (const auto& s : copies) EXPECT_EQ(s.ranks, 1) << s.label;
    Fitted truth = cpu_like();
    truth.copy_us = 0.3;
    truth.copy_GBps = 250.0;
    const sim::Topology t = sim::parse_topology(topology_yaml(truth, CalibrateOptions{}, "cpu", world), "<truth>");
    for (auto& s : copies) s.measured_us = sim::simulate(s.schedule, sim::Context{t, s.ranks, s.sizes}).time_us;
    Fitted f = cpu_like();
    fit_copy(copies, f);
    ASSERT_TRUE(f.copy_us && f.copy_GBps);
    EXPECT_NEAR(*f.copy_us, 0.3, 1e-6);
    EXPECT_NEAR(*f.copy_GBps, 250.0, 1e-3);
    const sim::Topology back = sim::parse_topology(topology_yaml(f, CalibrateOptions{}, "cpu", world), "<fit>");
    EXPECT_NEAR(back.gpu.local_copy_us(), 0.3, 1e-3);
    EXPECT_NEAR(back.gpu.local_copy_GBps(), 250.0, 0.5);
  }
  Fitted none = cpu_like();
  fit_copy({}, none);
  EXPECT_FALSE(none.copy_us || none.copy_GBps);
}

// nccl.step_sync_us: the median over sizes of a reduce-scatter and an
// all-gather alone less the two in one step (never below 0); and each costly
// operation's weight recovered from its kernels simulated with a known one.
TEST(OverlapFit, RecoversTheStepSyncAndTheCostlyOperations) {
  std::vector<MicroSample> plan = microbenchmark_plan(2, MicroOptions{});
  std::map<std::int64_t, double> alone;  // N -> reduce-scatter + all-gather
  for (auto& s : plan) {
    if (s.kind != MicroKind::collective) continue;
    s.measured_us = 10.0 + 1e-3 * double(s.sizes.at("N"));
    if (s.label.rfind("reducescatter f16 ", 0) == 0 || s.label.rfind("allgather f16 ", 0) == 0)
      alone[s.sizes.at("N")] += s.measured_us;
  }
  int pairs = 0;
  for (auto& s : plan)
    if (s.kind == MicroKind::paired) {
      s.measured_us = alone.at(s.sizes.at("N")) - (pairs++ == 0 ? 100.0 : 6.0);  // one outlier
      EXPECT_EQ(s.ranks, 2);
    }
  ASSERT_GE(pairs, 3);
  Fitted fitted = cpu_like();
  fitted.elementwise.launch_us = 1.0;
  // The simulator charges each alone and the pair once: what the two alone
  // took beyond the pair is one charge (floating point: the count is the
  // difference of two simulated times).
  constexpr double kCountRounding = 1e-9;
  EXPECT_NEAR(fit_step_sync(plan, fitted), 6.0, kCountRounding);
  // Pairs that claim more than the cheapest collective alone took (a loaded
  // machine): capped so that it less the sync still costs a launch.
  double cheapest = 1e300;
  for (const auto& s : plan)
    if (s.kind == MicroKind::collective) cheapest = std::min(cheapest, s.measured_us);
  for (auto& s : plan)
    if (s.kind == MicroKind::paired) s.measured_us -= 1000.0;
  EXPECT_NEAR(fit_step_sync(plan, fitted), cheapest - 1.0, kCountRounding);
  for (auto& s : plan)
    if (s.kind == MicroKind::paired) s.measured_us += 1050.0;  // pairs slower than their parts: no saving
  EXPECT_NEAR(fit_step_sync(plan, fitted), 0.0, kCountRounding);

  Fitted truth = cpu_like();
  truth.op_flops[std::size_t(model::CostlyOp::exp)] = 14.0;
  truth.op_flops[std::size_t(model::CostlyOp::dropout_hash)] = 9.0;
  truth.op_flops[std::size_t(model::CostlyOp::norm_element)] = 6.0;  // past the memory bound at these rates
  const sim::Topology t = sim::parse_topology(topology_yaml(truth, CalibrateOptions{}, "cpu", 2), "<truth>");
  std::vector<MicroSample> costly;
  for (auto& s : plan)
    if (s.kind == MicroKind::costly) {
      s.measured_us = sim::simulate(s.schedule, sim::Context{t, s.ranks, s.sizes}).time_us;
      costly.push_back(s);
    }
  Fitted f = cpu_like();
  fit_op_flops(costly, f);
  EXPECT_NEAR(*f.op_flops[std::size_t(model::CostlyOp::exp)], 14.0, 0.05);
  EXPECT_NEAR(*f.op_flops[std::size_t(model::CostlyOp::dropout_hash)], 9.0, 0.05);
  EXPECT_NEAR(*f.op_flops[std::size_t(model::CostlyOp::norm_element)], 6.0, 0.05);
  // A norm faster than a launch (the cpu backend's reduction is no engine
  // kernel) says nothing of the weight: it is left out, not fitted towards 0.
  const auto norm = std::find_if(costly.begin(), costly.end(), [](const MicroSample& s) {
    return s.costly[std::size_t(model::CostlyOp::norm_element)] > 0;
  });
  ASSERT_NE(norm, costly.end());
  for (int k = 0; k < 3; ++k) {
    MicroSample quick = *norm;
    quick.measured_us = 0.5 * truth.elementwise.launch_us;
    costly.push_back(quick);
  }
  Fitted with_quick = cpu_like();
  fit_op_flops(costly, with_quick);
  EXPECT_NEAR(*with_quick.op_flops[std::size_t(model::CostlyOp::norm_element)], 6.0, 0.05);
  costly.erase(costly.end() - 3, costly.end());
  // Every norm faster than a launch: the weight is 0, not the default's 2.
  std::vector<MicroSample> all_quick;
  for (auto s : costly)
    if (s.costly[std::size_t(model::CostlyOp::norm_element)] > 0) {
      s.measured_us = 0.5 * truth.elementwise.launch_us;
      all_quick.push_back(s);
    }
  Fitted none = cpu_like();
  fit_op_flops(all_quick, none);
  ASSERT_TRUE(none.op_flops[std::size_t(model::CostlyOp::norm_element)].has_value());
  EXPECT_EQ(*none.op_flops[std::size_t(model::CostlyOp::norm_element)], 0.0);
  EXPECT_FALSE(none.op_flops[std::size_t(model::CostlyOp::exp)].has_value());  // not sampled: the topology's default
  // A kernel its memory bounds (sqrt's, at these rates) leaves the weight
  // open below a limit; the fit takes the limit, and every kernel is
  // predicted as measured either way.
  const sim::Topology back = sim::parse_topology(topology_yaml(f, CalibrateOptions{}, "cpu", 2), "<fit>");
  for (const auto& s : costly)
    EXPECT_NEAR(sim::simulate(s.schedule, sim::Context{back, s.ranks, s.sizes}).time_us, s.measured_us,
                0.01 * s.measured_us)
        << s.label;
}

// A rate the samples did not bound is written as the file's cap, never as infinity.
// The GEMM microbenchmarks show the operands' cost (gpu.gemm_operand_GBps,
// the cpu backend widening and packing them per call): the plan's GEMMs
// "measured" by the simulator with a known operand rate beside a GEMM rate
// like this machine's give both back exactly (the fit's terms are the
// simulator's: no floor over memory besides the operands), and within 20%
// when every measurement is 10% off one way or the other.
TEST(OverlapFit, TheGemmSamplesShowTheOperandsCost) {
  constexpr double kWidenGBps = 12, kGFLOPs = 200, kNoise = 0.10, kTolerance = 0.20;
  Fitted truth = cpu_like();
  truth.elementwise.launch_us = 1.8;
  truth.gemm_f16 = {kGFLOPs, kWidenGBps};
  const sim::Topology topo = sim::parse_topology(topology_yaml(truth, CalibrateOptions{}, "cpu", 2), "<truth>");
  std::vector<GemmSample> exact, noisy;
  for (const auto& s : microbenchmark_plan(2, MicroOptions{}))
    if (s.kind == MicroKind::gemm && s.dtype == model::DType::f16) {
      const double us = sim::simulate(s.schedule, sim::Context{topo, s.ranks, s.sizes}).time_us;
      exact.push_back({s.flops, s.bytes, us});
      noisy.push_back({s.flops, s.bytes, us * (noisy.size() % 2 == 0 ? 1 + kNoise : 1 - kNoise)});
    }
  const GemmFit fit = fit_gemm(exact, truth.elementwise.launch_us);
  EXPECT_NEAR(fit.operand_GBps, kWidenGBps, 1e-6 * kWidenGBps);
  EXPECT_NEAR(fit.GFLOPs, kGFLOPs, 1e-6 * kGFLOPs);
  const GemmFit rough = fit_gemm(noisy, truth.elementwise.launch_us);
  EXPECT_NEAR(rough.operand_GBps, kWidenGBps, kTolerance * kWidenGBps);
  EXPECT_NEAR(rough.GFLOPs, kGFLOPs, kTolerance * kGFLOPs);
}

TEST(OverlapFit, UnboundedRatesAreTheCap) {
  EXPECT_EQ(bounded(std::numeric_limits<double>::infinity()), 1e6);
  EXPECT_EQ(bounded(0.0), 1e6);
  EXPECT_EQ(bounded(2.5), 2.5);
}

}  // namespace
}  // namespace coconet::validation
