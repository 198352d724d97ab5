// Calibration fits: constants used to generate exact samples are recovered,
// noise of a few percent moves them by about as much, and constants stay
// non-negative when the data would pull them below zero.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "model/error.h"
#include "validation/fit.h"

namespace coconet::validation {
namespace {

TEST(ValidationFit, NonNegativeLeastSquaresExact) {
  // y = 2 + 3 x: recovered exactly.
  std::vector<std::vector<double>> a;
  std::vector<double> y;
  for (double x : {1.0, 2.0, 5.0, 10.0}) {
    a.push_back({1.0, x});
    y.push_back(2 + 3 * x);
  }
  const auto c = fit_relative_nonnegative(a, y);
  EXPECT_NEAR(c[0], 2.0, 1e-9);
  EXPECT_NEAR(c[1], 3.0, 1e-9);
}

TEST(ValidationFit, NegativeInterceptIsClampedToZero) {
  // y = 3x - 1 would need a negative intercept: the fit fixes it at 0.
  std::vector<std::vector<double>> a;
  std::vector<double> y;
  for (double x : {1.0, 2.0, 4.0}) {
    a.push_back({1.0, x});
    y.push_back(3 * x - 1);
  }
  const auto c = fit_relative_nonnegative(a, y);
  EXPECT_DOUBLE_EQ(c[0], 0.0);
  EXPECT_GT(c[1], 0.0);
}

TEST(ValidationFit, RejectsTooFewSamplesAndBadTimes) {
  EXPECT_THROW((void)fit_relative_nonnegative({{1.0, 2.0}}, {3.0}), UserError);
  EXPECT_THROW((void)fit_relative_nonnegative({{1.0}, {2.0}}, {3.0, 0.0}), UserError);
}

TEST(ValidationFit, ElementwiseRecoversRoofline) {
  const ElementwiseFit truth{5.0, 2.0, 0.5, 0};  // 5 us launch, 2 GB/s, 0.5 GFLOP/s
  std::vector<ElementwiseSample> s;
  for (double n : {1e3, 1e4, 1e5, 1e6}) {
    s.push_back({12 * n, 1 * n, 0});   // memory-bound: 12 bytes, 1 flop per element
    s.push_back({12 * n, 40 * n, 0});  // flop-bound: 40 flops per element
  }
  for (auto& e : s) e.measured_us = elementwise_model_us(truth, e.bytes, e.flops);
  const ElementwiseFit f = fit_elementwise(s);
  EXPECT_NEAR(f.launch_us, 5.0, 1e-6);
  EXPECT_NEAR(f.GBps, 2.0, 1e-6);
  EXPECT_NEAR(f.GFLOPs, 0.5, 1e-6);
}

TEST(ValidationFit, ElementwiseToleratesNoise) {
  const ElementwiseFit truth{5.0, 2.0, 0.5, 0};
  std::vector<ElementwiseSample> s;
  int k = 0;
  for (double n : {1e3, 1e4, 1e5, 1e6}) {
    for (double flops : {1.0, 40.0}) {
      const double noise = (k++ % 2 ? 1.03 : 0.97);
      s.push_back({12 * n, flops * n, elementwise_model_us(truth, 12 * n, flops * n) * noise});
    }
  }
  const ElementwiseFit f = fit_elementwise(s);
  EXPECT_NEAR(f.GBps, 2.0, 0.2);
  EXPECT_NEAR(f.GFLOPs, 0.5, 0.05);
}

// Square GEMMs of f16 operands: FLOPs grow as n^3, operand bytes as n^2.
std::vector<GemmSample> square_gemms(double GFLOPs, double operand_GBps, double launch_us) {
  std::vector<GemmSample> s;
  for (double n : {32.0, 64.0, 128.0, 256.0}) {
    const double flops = 2 * n * n * n, bytes = 3 * n * n * 2;
    const double operands = std::isfinite(operand_GBps) ? bytes / (operand_GBps * 1e3) : 0.0;
    s.push_back({flops, bytes, launch_us + flops / (GFLOPs * 1e3) + operands});
  }
  return s;
}

TEST(ValidationFit, GemmRate) {
  const GemmFit f = fit_gemm(square_gemms(20.0, std::numeric_limits<double>::infinity(), 5.0), 5.0);
  EXPECT_NEAR(f.GFLOPs, 20.0, 1e-6);
  EXPECT_FALSE(std::isfinite(f.operand_GBps) && f.operand_GBps < 1e9) << f.operand_GBps;
}

// The cpu backend widens and packs its operands per call: a cost per byte
// besides the FLOPs, told apart by the square sizes' bytes growing slower.
TEST(ValidationFit, GemmRateAndOperandRate) {
  const GemmFit f = fit_gemm(square_gemms(40.0, 2.5, 3.0), 3.0);
  EXPECT_NEAR(f.GFLOPs, 40.0, 1e-6);
  EXPECT_NEAR(f.operand_GBps, 2.5, 1e-9);
  EXPECT_NEAR(gemm_model_us(f, 3.0, 2 * 64.0 * 64 * 64, 3 * 64.0 * 64 * 2),
              3.0 + 2 * 64.0 * 64 * 64 / 40e3 + 3 * 64.0 * 64 * 2 / 2.5e3, 1e-9);
  // The FLOP rate alone misfits the same samples: the operand term is needed.
  std::vector<GemmSample> one = square_gemms(40.0, 2.5, 3.0);
  for (auto& g : one) g.bytes = 0;
  const GemmFit flops_only = fit_gemm(one, 3.0);
  EXPECT_GT(std::abs(flops_only.GFLOPs - 40.0), 1.0);
}

TEST(ValidationFit, GemmNeedsAPositiveFlopRate) {
  EXPECT_THROW((void)fit_gemm({{1e6, 1e4, 5.0}, {1e7, 4e4, 5.0}}, 5.0), UserError);
}

TEST(ValidationFit, CollectivesRecoverRing) {
  const CollectiveFit truth{10.0, 2.0, 3.0, 0.5};
  std::vector<CollectiveSample> s;
  for (const char* op : {"allreduce", "reducescatter", "allgather", "send"})
    for (double bytes : {1e3, 1e5, 1e7})
      s.push_back({op, bytes, 4, collective_model_us(truth, op, bytes, 4)});
  const CollectiveFit f = fit_collectives(s);
  EXPECT_NEAR(f.base_us, 10.0, 1e-6);
  EXPECT_NEAR(f.hop_us, 2.0, 1e-6);
  EXPECT_NEAR(f.GBps, 3.0, 1e-6);
  EXPECT_NEAR(f.reduce_GBps, 0.5, 1e-6);
  // The samples' features are the simulator's ring (nccl-tests' conventions):
  // allreduce moves 2(n-1)/n of its buffer in 2(n-1) steps and combines (n-1)/n.
  const sim::RingFeatures ar = features_of("allreduce", 1000, 4);
  EXPECT_DOUBLE_EQ(ar.steps(), 6);
  EXPECT_DOUBLE_EQ(ar.bus_bytes, 1500);
  EXPECT_DOUBLE_EQ(ar.reduced_bytes, 750);
  EXPECT_DOUBLE_EQ(features_of("allgather", 1000, 4).reduced_bytes, 0.0);
  EXPECT_DOUBLE_EQ(features_of("reducescatter", 1000, 4).reduced_bytes, 750);
  EXPECT_DOUBLE_EQ(features_of("send", 1000, 4).steps(), 1);
  EXPECT_THROW((void)features_of("gather", 1000, 4), UserError);
}

TEST(ValidationFit, FreeReductionsFitAsUnbounded) {
  const CollectiveFit truth{10.0, 2.0, 3.0, std::numeric_limits<double>::infinity()};
  std::vector<CollectiveSample> s;
  for (const char* op : {"allreduce", "reducescatter", "allgather", "send"})
    for (double bytes : {1e3, 1e5, 1e7}) s.push_back({op, bytes, 4, collective_model_us(truth, op, bytes, 4)});
  EXPECT_FALSE(std::isfinite(fit_collectives(s).reduce_GBps));
}

TEST(ValidationFit, ScalarFitFindsTheMinimum) {
  const std::vector<double> measured = {30.0, 60.0};
  const auto model = [](double x) { return std::vector<double>{10.0 + 40.0 * x, 20.0 + 80.0 * x}; };
  EXPECT_NEAR(fit_scalar(measured, model, 0.0, 1.0), 0.5, 1e-9);
  EXPECT_NEAR(fit_scalar(measured, model, 0.0, 0.25), 0.25, 1e-9);  // the bound when the truth lies outside
  EXPECT_THROW((void)fit_scalar({}, model, 0.0, 1.0), UserError);
}

}  // namespace
}  // namespace coconet::validation
