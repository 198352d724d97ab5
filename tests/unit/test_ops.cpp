// The model's element-wise operators and their math (model/ops.h), the one
// definition the interpreter and every backend evaluate: each operator on
// known values, in f32 and f64 alike, and the dropout mask's properties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/expr.h"
#include "model/ops.h"
#include "model/parse.h"

namespace coconet::model {
namespace {

TEST(Ops, EachBinaryOperatorOnThreeAndTwo) {
  const std::vector<std::pair<BinaryOp, double>> expected{
      {BinaryOp::add, 5}, {BinaryOp::sub, 1}, {BinaryOp::mul, 6}, {BinaryOp::div, 1.5},
      {BinaryOp::pow, 9}, {BinaryOp::max, 3}, {BinaryOp::min, 2}, {BinaryOp::lt, 0},
      {BinaryOp::le, 0},  {BinaryOp::gt, 1},  {BinaryOp::ge, 1},  {BinaryOp::eq, 0},
      {BinaryOp::ne, 1}};
  for (const auto& [op, want] : expected) {
    EXPECT_DOUBLE_EQ(apply_binary(op, 3.0, 2.0), want) << static_cast<int>(op);
    EXPECT_FLOAT_EQ(apply_binary(op, 3.0f, 2.0f), static_cast<float>(want)) << static_cast<int>(op);
  }
}

TEST(Ops, EachUnaryOperator) {
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::neg, 4.0), -4.0);
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::sqrt, 4.0), 2.0);
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::rsqrt, 4.0), 0.5);
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::abs, -4.0), 4.0);
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::exp, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::log, 1.0), 0.0);
  EXPECT_FLOAT_EQ(apply_unary(UnaryOp::rsqrt, 16.0f), 0.25f);
}

// tanh is std::tanh in either precision.
TEST(Ops, TanhIsTheStandardLibrarys) {
  for (double x = -6.0; x <= 6.0; x += 0.125) {
    EXPECT_EQ(apply_unary(UnaryOp::tanh, x), std::tanh(x)) << x;
    EXPECT_EQ(apply_unary(UnaryOp::tanh, static_cast<float>(x)), std::tanh(static_cast<float>(x))) << x;
  }
}

// GELU, tanh form, against a long-double reference written from the paper
// (Hendrycks and Gimpel 2016): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
long double gelu_reference(long double x) {
  const long double pi = 3.141592653589793238462643383279502884L;
  return 0.5L * x * (1.0L + std::tanh(std::sqrt(2.0L / pi) * (x + 0.044715L * x * x * x)));
}

TEST(Ops, GeluMatchesTheTanhFormula) {
  EXPECT_NEAR(kGeluSqrt2OverPi, std::sqrt(2.0 / 3.141592653589793), 1e-16);
  for (double x = -8.0; x <= 8.0; x += 1.0 / 64) {
    const auto want = static_cast<double>(gelu_reference(x));
    EXPECT_NEAR(apply_unary(UnaryOp::gelu, x), want, 1e-15 * std::max(1.0, std::fabs(want))) << x;
    // f32: within a few ulps of the exact value (the cpu and cuda kernels compute in f32).
    EXPECT_NEAR(apply_unary(UnaryOp::gelu, static_cast<float>(x)), want, 4e-7 * std::max(1.0, std::fabs(want))) << x;
  }
  // Known points: gelu(0) = 0, gelu(x) -> x for large x, -> 0 for very negative x.
  EXPECT_EQ(apply_unary(UnaryOp::gelu, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(apply_unary(UnaryOp::gelu, 20.0), 20.0);
  EXPECT_NEAR(apply_unary(UnaryOp::gelu, -20.0), 0.0, 1e-300);
  EXPECT_NEAR(apply_unary(UnaryOp::gelu, 1.0), 0.8411919906082768, 1e-15);
}

// Arithmetic in FLOPs, each costly operation on its own; at the default
// weights the total is one FLOP per operation, 9 for gelu, 2 for dropout.
TEST(Ops, ElementCostCountsArithmeticAndEachCostlyOperation) {
  const ElementCost c = element_cost(parse_expr("gelu(x) + sqrt(y) * pow(x, 2) - dropout(x, 0.1) / exp(y)"));
  EXPECT_EQ(c.flops, kGeluArithmetic + 4 + 2);  // gelu's arithmetic, + * - /, dropout's compare and scale
  const auto n = [&](CostlyOp op) { return c.costly[static_cast<std::size_t>(op)]; };
  EXPECT_EQ(n(CostlyOp::tanh), 1);
  EXPECT_EQ(n(CostlyOp::sqrt), 1);
  EXPECT_EQ(n(CostlyOp::pow), 1);
  EXPECT_EQ(n(CostlyOp::exp), 1);
  EXPECT_EQ(n(CostlyOp::dropout_hash), 1);
  EXPECT_EQ(n(CostlyOp::log) + n(CostlyOp::rsqrt), 0);
  double at_defaults = c.flops;
  for (int k = 0; k < kCostlyOps; ++k) at_defaults += c.costly[std::size_t(k)] * kDefaultOpFlops[k];
  EXPECT_EQ(at_defaults, 9 + 4 + 1 + 1 + 1 + 2);  // gelu 9, + * - /, sqrt, pow, exp, dropout 2
  EXPECT_EQ(to_string(CostlyOp::dropout_hash), "dropout");
}

TEST(Ops, DropoutMaskDependsOnSeedAndIndexOnly) {
  constexpr float kP = 0.25f;
  constexpr std::uint64_t kSeed = 7;
  constexpr int kElements = 100000;
  int dropped = 0;
  for (int i = 0; i < kElements; ++i) {
    const auto index = static_cast<std::uint64_t>(i);
    const double d = dropout(2.0, kP, kSeed, index);
    const float f = dropout(2.0f, kP, kSeed, index);
    EXPECT_EQ(d == 0.0, f == 0.0f) << i;  // the same mask in f32 and f64
    if (d == 0.0)
      ++dropped;
    else
      EXPECT_DOUBLE_EQ(d, 2.0 / (1.0 - kP));
    EXPECT_EQ(dropout(2.0, kP, kSeed, index), d);  // deterministic
  }
  EXPECT_NEAR(static_cast<double>(dropped) / kElements, kP, 0.01);
  EXPECT_EQ(dropout(2.0, 0.0f, kSeed, 3), 2.0);  // p = 0 keeps everything
  int differ = 0;
  for (std::uint64_t i = 0; i < 1000; ++i)
    differ += (dropout(1.0, 0.5f, 1, i) == 0.0) != (dropout(1.0, 0.5f, 2, i) == 0.0);
  EXPECT_GT(differ, 300);  // another seed, another mask
}

}  // namespace
}  // namespace coconet::model
