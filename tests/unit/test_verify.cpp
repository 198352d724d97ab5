// exec::verify element by element on one rank (the dry backend's host
// reductions are the identity): tolerances, and non-finite values, which
// never verify (an f16 overflow in the reference used to make inf == inf pass,
// so a wrong GEMM that also overflowed went unnoticed).
#include <gtest/gtest.h>

#include <algorithm>
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

// Parts placed differently in the global tensor (a sliced schedule's output
// against the replicated reference): element (row, col) of the actual part is
// compared where the expected part holds it, and a mismatch is named by its
// global index. The actual part is f32 (Backend::read_f32), the reference
// f32 or double (the interpreter's).
OutputPart placed(HostValues values, std::int64_t rows, std::int64_t cols, std::int64_t row_begin,
                  std::int64_t col_begin, std::int64_t local_rows, std::int64_t local_cols) {
  OutputPart p;
  p.info.type.dtype = model::DType::f32;
  p.info.rows = rows;
  p.info.cols = cols;
  p.info.row_begin = row_begin;
  p.info.col_begin = col_begin;
  p.info.local_rows = local_rows;
  p.info.local_cols = local_cols;
  p.info.here = true;
  p.values = std::move(values);
  return p;
}

TEST(Verify, APartIsComparedWhereTheReferenceHoldsItsElements) {
  testing::DryBackend backend(0, 1, plan::Capabilities{});
  backend.set_groups(1);
  // The whole 3 x 4 tensor, element (r, c) = 10 r + c, as the reference.
  std::vector<double> whole;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) whole.push_back(10 * r + c);
  // Rows 1-2, columns 2-3 of it as a schedule's part.
  std::vector<float> part{12, 13, 22, 23};
  const Outputs e{{"y", placed(whole, 3, 4, 0, 0, 3, 4)}};
  EXPECT_TRUE(verify(backend, {"y"}, {{"y", placed(part, 3, 4, 1, 2, 2, 2)}}, e, 0.0, "reference").ok);
  EXPECT_TRUE(verify(backend, {"y"}, {{"y", placed(std::vector<float>(whole.begin(), whole.end()), 3, 4, 0, 0, 3, 4)}},
                     {{"y", placed(part, 3, 4, 1, 2, 2, 2)}}, 0.0, "reference")
                  .ok);
  part[2] = 21.5f;  // element (2, 2): global index 10
  const Verdict v = verify(backend, {"y"}, {{"y", placed(part, 3, 4, 1, 2, 2, 2)}}, e, 0.0, "reference");
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.first_mismatch.find("y[10]"), std::string::npos) << v.first_mismatch;
  EXPECT_NE(v.first_mismatch.find("expected 22"), std::string::npos) << v.first_mismatch;
  EXPECT_DOUBLE_EQ(v.max_abs_error, 0.5);
  // Equal bits are not enough: an inf on both sides still fails, in f32 as in double.
  std::vector<float> inf_part{12, 13, 22, static_cast<float>(kInf)};
  const Outputs inf_ref{{"y", placed(inf_part, 3, 4, 1, 2, 2, 2)}};
  const Verdict inf = verify(backend, {"y"}, {{"y", placed(inf_part, 3, 4, 1, 2, 2, 2)}}, inf_ref, 0.0, "reference");
  EXPECT_FALSE(inf.ok);
  EXPECT_NE(inf.first_mismatch.find("y[11]"), std::string::npos) << inf.first_mismatch;
  // A part beside the reference's columns compares nothing.
  const Outputs left{{"y", placed(std::vector<float>{0, 0, 0}, 3, 4, 0, 0, 3, 1)}};
  EXPECT_TRUE(verify(backend, {"y"}, {{"y", placed(part, 3, 4, 1, 2, 2, 2)}}, left, 0.0, "reference").ok);
}

// Parts of whole rows (a 1-D tensor's elements are rows of one column),
// compared as one run of the rows both hold: a slice against the whole
// reference, the whole against a slice, and a slice beside the reference's.
TEST(Verify, RowPartsAreComparedWhereTheReferenceHoldsTheirRows) {
  testing::DryBackend backend(0, 1, plan::Capabilities{});
  backend.set_groups(1);
  std::vector<float> whole;  // element i = i
  for (int i = 0; i < 8; ++i) whole.push_back(static_cast<float>(i));
  std::vector<float> upper(whole.begin() + 4, whole.end());  // rows 4-7
  const Outputs e{{"w", placed(whole, 8, 1, 0, 0, 8, 1)}};
  EXPECT_TRUE(verify(backend, {"w"}, {{"w", placed(upper, 8, 1, 4, 0, 4, 1)}}, e, 0.0, "reference").ok);
  upper[1] = 9;  // global row 5
  const Verdict v = verify(backend, {"w"}, {{"w", placed(upper, 8, 1, 4, 0, 4, 1)}}, e, 0.0, "reference");
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.first_mismatch.find("w[5]"), std::string::npos) << v.first_mismatch;
  EXPECT_NE(v.first_mismatch.find("expected 5"), std::string::npos) << v.first_mismatch;
  // The whole against rows 2-5 of the reference: a wrong row 6 is outside it, a wrong row 3 is not.
  const Outputs middle{{"w", placed(std::vector<float>(whole.begin() + 2, whole.begin() + 6), 8, 1, 2, 0, 4, 1)}};
  std::vector<float> got = whole;
  got[6] = 60;
  EXPECT_TRUE(verify(backend, {"w"}, {{"w", placed(got, 8, 1, 0, 0, 8, 1)}}, middle, 0.0, "reference").ok);
  got[3] = 30;
  const Verdict w = verify(backend, {"w"}, {{"w", placed(got, 8, 1, 0, 0, 8, 1)}}, middle, 0.0, "reference");
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.first_mismatch.find("w[3]"), std::string::npos) << w.first_mismatch;
  // Rows 0-3 against rows 4-7: nothing in common.
  const std::vector<float> lower(got.begin(), got.begin() + 4);
  EXPECT_TRUE(verify(backend, {"w"}, {{"w", placed(lower, 8, 1, 0, 0, 4, 1)}}, {{"w", placed(upper, 8, 1, 4, 0, 4, 1)}},
                     0.0, "reference")
                  .ok);
}

// A schedule's outputs are read from the backend a block at a time
// (OutputSources): the same verdict as the whole part, a mismatch past the
// first block named by its index, and no read of the whole part at once.
TEST(Verify, OutputsReadInBlocksGiveTheWholePartsVerdict) {
  testing::DryBackend backend(0, 1, plan::Capabilities{});
  backend.set_groups(1);
  const std::int64_t n = (std::int64_t{1} << 21) + 5;  // two blocks and a bit
  std::vector<float> values(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) values[static_cast<std::size_t>(i)] = static_cast<float>(i % 1000);
  const Outputs e{{"y", placed(values, 1, n, 0, 0, 1, n)}};
  values[static_cast<std::size_t>(n - 3)] += 0.5f;
  std::int64_t reads = 0, largest = 0;
  OutputSource source{e.at("y").info, n, [&](std::int64_t first, std::span<float> out) {
                        ++reads;
                        largest = std::max<std::int64_t>(largest, static_cast<std::int64_t>(out.size()));
                        std::copy_n(values.begin() + first, out.size(), out.begin());
                      }};
  const Verdict blocks = verify(backend, {"y"}, OutputSources{{"y", source}}, e, 0.0, "reference");
  const Verdict whole = verify(backend, {"y"}, {{"y", placed(values, 1, n, 0, 0, 1, n)}}, e, 0.0, "reference");
  EXPECT_FALSE(blocks.ok);
  EXPECT_EQ(blocks.first_mismatch, whole.first_mismatch);
  EXPECT_NE(blocks.first_mismatch.find("y[" + std::to_string(n - 3) + "]"), std::string::npos) << blocks.first_mismatch;
  EXPECT_DOUBLE_EQ(blocks.max_abs_error, 0.5);
  EXPECT_GT(reads, 2);
  EXPECT_LT(largest, n);
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
