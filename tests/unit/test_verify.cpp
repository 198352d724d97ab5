// exec::verify element by element on one rank (the dry backend's host
// reductions are the identity): tolerances, and non-finite values, which
// never verify (an f16 overflow in the reference used to make inf == inf pass,
// so a wrong GEMM that also overflowed went unnoticed).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dry_backend.h"
#include "exec/integer_values.h"
#include "exec/verify.h"
#include "model/builder.h"
#include "model/catalog.h"
#include "model/parse.h"

namespace coconet::exec {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The largest finite f16 value; y of megatron_mlp at full size on one rank is
// about 76,800, beyond it.
constexpr double kF16Max = 65504.0;

OutputPart part(std::vector<double> values, model::DType dtype = model::DType::f16) {
  OutputPart p;
  p.info.type.dtype = dtype;
  p.info.rows = p.info.local_rows = 1;
  p.info.cols = p.info.local_cols = static_cast<std::int64_t>(values.size());
  p.info.here = true;
  p.values = std::move(values);
  return p;
}

Verdict check(std::vector<double> expected, std::vector<double> actual, double rtol = 0.0) {
  testing::DryBackend backend(0, 1, plan::Capabilities{});
  backend.set_groups(1);
  const Outputs e{{"y", part(std::move(expected))}}, a{{"y", part(std::move(actual))}};
  return verify(backend, {"y"}, a, e, rtol, "unscheduled program");
}

TEST(Verify, EqualFiniteValuesPassAndADifferenceIsNamed) {
  EXPECT_TRUE(check({1, 2, 3}, {1, 2, 3}).ok);
  const Verdict v = check({1, 2, 3}, {1, 2.5, 3});
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.first_mismatch.find("y[1]"), std::string::npos) << v.first_mismatch;
  EXPECT_DOUBLE_EQ(v.max_abs_error, 0.5);
}

TEST(Verify, ToleranceIsRelativeToTheLargerOfExpectedAndOne) {
  EXPECT_TRUE(check({1000}, {1000.5}, 0x1p-10).ok);
  EXPECT_FALSE(check({1000}, {1001.5}, 0x1p-10).ok);
}

// Used to pass: both the unscheduled program and the schedule overflowed f16.
TEST(Verify, AnInfReferenceEqualToAnInfResultNoLongerPasses) {
  const Verdict v = check({1, kInf}, {1, kInf});
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(std::isinf(v.max_abs_error));
  EXPECT_NE(v.first_mismatch.find("not finite"), std::string::npos) << v.first_mismatch;
  EXPECT_FALSE(check({kNaN}, {kNaN}).ok);
  EXPECT_FALSE(check({-kInf}, {-kInf}, kInf).ok);
}

TEST(Verify, ANonFiniteResultFailsWhereTheReferenceIsFiniteWhateverTheTolerance) {
  for (const double bad : {kInf, -kInf, kNaN}) {
    const Verdict v = check({76800.0}, {bad}, kInf);
    EXPECT_FALSE(v.ok) << bad;
    EXPECT_NE(v.first_mismatch.find("non-finite result"), std::string::npos) << v.first_mismatch;
  }
  EXPECT_TRUE(check({kF16Max}, {kF16Max}).ok);
}

TEST(Verify, AcceptableIsTheElementRule) {
  EXPECT_TRUE(acceptable(2.0, 2.0, 0.0));
  EXPECT_FALSE(acceptable(kInf, kInf, 0.0));
  EXPECT_FALSE(acceptable(1.0, kInf, kInf));
  EXPECT_FALSE(acceptable(kNaN, 1.0, kInf));
  EXPECT_TRUE(acceptable(0.0, 0x1p-11, 0x1p-10));
}

// Schedules are held exact unless the program regroups sums of values that
// need not be integers (the transformer layer's MLP GEMM reads a GELU's).
model::Program sum_of(const std::string& expr) {
  return model::ProgramBuilder("s")
      .param("N", 4)
      .scalar("half", 0.5)
      .scalar("two", 2.0)
      .tensor("x", model::DType::f32, {"N"}, model::Layout::local())
      .stmt("y = " + expr)
      .stmt("z = allreduce(sum, y)")
      .output("z")
      .build();
}

TEST(ScheduleTolerance, ExactUnlessSumsOfNonIntegersAreRegrouped) {
  for (const std::string e : {"x * 2 - x", "max(x, 1) * two", "select(x > 0, x, -x)", "abs(x)"})
    EXPECT_FALSE(sums_non_integers(sum_of(e))) << e;
  for (const std::string e : {"x / 2", "x * half", "x * 0.5", "sqrt(x)", "gelu(x)", "dropout(x, 0.1)"})
    EXPECT_TRUE(sums_non_integers(sum_of(e))) << e;
  for (const std::string w : {"adam", "lamb", "megatron_mlp", "megatron_attention", "gpt3_pipeline"})
    EXPECT_FALSE(sums_non_integers(model::load_program(model::resolve_workload(w)))) << w;
  EXPECT_TRUE(sums_non_integers(model::load_program(model::resolve_workload("transformer_layer"))));
  const model::Program adam = model::load_program(model::resolve_workload("adam"));
  EXPECT_EQ(schedule_tolerance(adam, adam.bind()), 0.0);
  const model::Program layer = model::load_program(model::resolve_workload("transformer_layer"));
  EXPECT_GT(schedule_tolerance(layer, layer.bind()), 0.0);
}

// A GEMM schedule regroups K-term sums: the tolerance grows with K (u = 2^-24
// a term) and, for a 16-bit output, by the type's half ulp.
TEST(ScheduleTolerance, GemmsFromTheReductionLengthAndTheOutputType) {
  EXPECT_DOUBLE_EQ(gemm_reorder_tolerance(1024, model::DType::f32), 1024 * 0x1p-24);
  EXPECT_DOUBLE_EQ(gemm_reorder_tolerance(1024, model::DType::f16), 1024 * 0x1p-24 + 0x1p-10);
  EXPECT_DOUBLE_EQ(gemm_reorder_tolerance(1024, model::DType::bf16), 1024 * 0x1p-24 + 0x1p-7);
  EXPECT_GT(gemm_reorder_tolerance(4096, model::DType::f32), gemm_reorder_tolerance(1024, model::DType::f32));
  // megatron_mlp (f16): its second GEMM sums F = 4H terms, the largest.
  const model::Program mlp = model::load_program(model::resolve_workload("megatron_mlp"));
  for (const std::int64_t h : {std::int64_t{64}, std::int64_t{3072}}) {
    const model::Bindings sizes = mlp.bind({{"H", h}});
    EXPECT_DOUBLE_EQ(schedule_tolerance(mlp, sizes), gemm_reorder_tolerance(4 * h, model::DType::f16)) << h;
  }
}

}  // namespace
}  // namespace coconet::exec
