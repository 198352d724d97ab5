// The reference interpreter on small hand-checked programs: inputs,
// collectives (ragged slices included), norms, matmul layouts, sends,
// broadcasting, dropout masks, and the comparison of outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/builder.h"
#include "model/input_pattern.h"
#include "model/interpreter.h"
#include "unit/test_sched_util.h"

namespace coconet::model {
namespace {

using sched_test::workload;

// One input x of the given layout, one statement `y = <rhs>` as the output.
Program one_stmt(Layout x_layout, const std::string& rhs, std::vector<std::string> shape = {"N"}) {
  return ProgramBuilder("one")
      .param("N", 7)
      .param("M", 3)
      .tensor("x", DType::f32, shape, x_layout)
      .stmt("y = " + rhs)
      .output("y")
      .build();
}

std::vector<double> input_global(const Program& p, const std::string& n, int ranks) {
  return global_value(make_inputs(p, ranks, p.bind()).at(n), ranks);
}

TEST(Inputs, AreSmallIntegersPositiveUnlessLocal) {
  const Program p = workload("adam");
  const State in = make_inputs(p, 3, p.bind({{"N", 37}}));
  for (const auto& [name, v] : in)
    for (const auto& part : v.ranks)
      for (double x : part) {
        EXPECT_EQ(x, std::round(x)) << name;
        if (v.type.layout.is_local()) {
          EXPECT_LE(std::fabs(x), 3.0) << name;
        } else {
          EXPECT_GE(x, 1.0) << name;
          EXPECT_LE(x, 4.0) << name;
        }
      }
}

TEST(Inputs, AreDeterministicAndDifferPerRankOnlyWhenLocal) {
  const Program p = workload("adam");
  const Bindings b = p.bind({{"N", 37}});
  const State a = make_inputs(p, 2, b);
  const State c = make_inputs(p, 2, b);
  EXPECT_EQ(a.at("g").ranks, c.at("g").ranks);
  EXPECT_NE(a.at("g").ranks[0], a.at("g").ranks[1]);
  EXPECT_EQ(a.at("w").ranks[0], a.at("w").ranks[1]);
  EXPECT_NE(make_inputs(p, 2, b, 7).at("w").ranks[0], a.at("w").ranks[0]);
}

TEST(Inputs, SameGlobalValueWhetherReplicatedOrSliced) {
  const Program rep = one_stmt(Layout::replicated(), "x * 2");
  const Program sli = one_stmt(Layout::sliced(0), "x * 2");
  EXPECT_EQ(input_global(rep, "x", 3), input_global(sli, "x", 3));
}

// The block pattern the executor hands a backend (model/input_pattern.h)
// gives every rank's part of a tensor sliced along its columns exactly as the
// interpreter's inputs: the same function on host and device.
TEST(Inputs, BlockPatternOfAColumnSliceEqualsTheInterpretersPart) {
  const Program p = ProgramBuilder("cols")
                        .param("R", 5)
                        .param("C", 11)
                        .tensor("a", DType::f32, {"R", "C"}, Layout::replicated())
                        .tensor("x", DType::f32, {"R", "C"}, Layout::sliced(1))
                        .stmt("y = x + a")
                        .output("y")
                        .build();
  const int ranks = 3;
  const State in = make_inputs(p, ranks, p.bind(), 7);
  std::int64_t col_begin = 0;
  for (int r = 0; r < ranks; ++r) {
    const auto& part = in.at("x").ranks.at(static_cast<std::size_t>(r));
    InputPattern pattern;
    pattern.key = input_key(7, 1);  // x is the second input
    pattern.rank = r;
    pattern.cols = 11;
    pattern.col_begin = col_begin;
    pattern.local_cols = static_cast<std::int64_t>(part.size()) / 5;
    for (std::size_t i = 0; i < part.size(); ++i)
      EXPECT_EQ(input_at(pattern, static_cast<std::int64_t>(i)), part[i]) << "rank " << r << " element " << i;
    pattern.key = input_key(7, 0);  // another tensor's stream differs somewhere
    bool differs = false;
    for (std::size_t i = 0; i < part.size(); ++i) differs |= input_at(pattern, static_cast<std::int64_t>(i)) != part[i];
    EXPECT_TRUE(differs);
    col_begin += pattern.local_cols;
  }
  EXPECT_EQ(col_begin, 11);
}

TEST(Collectives, AllreduceSumsInRankOrder) {
  const Program p = one_stmt(Layout::local(), "allreduce(sum, x)");
  const State in = make_inputs(p, 3, p.bind());
  const State out = interpret(p, 3, p.bind(), in);
  const auto& x = in.at("x").ranks;
  for (int r = 0; r < 3; ++r)
    for (std::size_t i = 0; i < 7; ++i)
      EXPECT_EQ(out.at("y").ranks[static_cast<std::size_t>(r)][i], x[0][i] + x[1][i] + x[2][i]);
}

TEST(Collectives, ReducescatterGivesRaggedSlices) {
  const Program p = one_stmt(Layout::local(), "reducescatter(max, x)");
  const State in = make_inputs(p, 3, p.bind());
  const State out = interpret(p, 3, p.bind(), in);
  const auto& y = out.at("y");
  EXPECT_EQ(y.ranks[0].size(), 3u);  // 7 = 3 + 2 + 2
  EXPECT_EQ(y.ranks[1].size(), 2u);
  EXPECT_EQ(y.ranks[2].size(), 2u);
  const auto whole = global_value(y, 3);
  const auto& x = in.at("x").ranks;
  for (std::size_t i = 0; i < 7; ++i) EXPECT_EQ(whole[i], std::max({x[0][i], x[1][i], x[2][i]}));
}

TEST(Collectives, AllgatherOfSlicesOfDimensionOne) {
  const Program p = one_stmt(Layout::sliced(1), "allgather(x)", {"M", "N"});
  const State in = make_inputs(p, 4, p.bind());
  const State out = interpret(p, 4, p.bind(), in);
  EXPECT_EQ(global_value(out.at("y"), 4), global_value(in.at("x"), 4));
  EXPECT_EQ(out.at("y").ranks[3].size(), 21u);
}

TEST(Collectives, BroadcastCopiesTheRoot) {
  const Program p = one_stmt(Layout::local(), "broadcast(x, 1)");
  const State in = make_inputs(p, 3, p.bind());
  const State out = interpret(p, 3, p.bind(), in);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(out.at("y").ranks[static_cast<std::size_t>(r)], in.at("x").ranks[1]);
}

TEST(Collectives, SendMovesToTheSamePositionOfTheNextGroup) {
  const Program p = one_stmt(Layout::local(), "send(x, next)");
  const State in = make_inputs(p, 2, p.bind());
  const State out = interpret(p, 2, p.bind(), in);
  const auto& y = out.at("y");
  ASSERT_EQ(y.ranks.size(), 4u);
  EXPECT_TRUE(y.ranks[0].empty());
  EXPECT_EQ(y.ranks[2], in.at("x").ranks[0]);
  EXPECT_EQ(y.ranks[3], in.at("x").ranks[1]);
}

TEST(Norm, OfSlicesEqualsNormOfTheWhole) {
  const Program whole = one_stmt(Layout::replicated(), "norm(x)");
  const Program sliced = one_stmt(Layout::sliced(0), "norm(x)");
  const auto a = global_value(
      interpret(whole, 3, whole.bind(), make_inputs(whole, 3, whole.bind())).at("y"), 3);
  const auto b = global_value(
      interpret(sliced, 3, sliced.bind(), make_inputs(sliced, 3, sliced.bind())).at("y"), 3);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NEAR(a[0], b[0], 1e-12 * a[0]);
  double sq = 0;
  for (double x : input_global(whole, "x", 3)) sq += x * x;
  EXPECT_DOUBLE_EQ(a[0], std::sqrt(sq));
}

TEST(Matmul, SlicedPartialSumsAllreducedEqualTheWholeProduct) {
  const Program p = ProgramBuilder("mm")
                        .param("M", 3)
                        .param("K", 5)
                        .param("N", 2)
                        .tensor("a", DType::f32, {"M", "K"}, Layout::sliced(1))
                        .tensor("b", DType::f32, {"K", "N"}, Layout::sliced(0))
                        .stmt("c = matmul(a, b)")
                        .stmt("d = allreduce(sum, c)")
                        .output("d")
                        .build();
  for (int ranks : {1, 2, 4, 8}) {  // 8 > K: some ranks hold no columns at all
    const State in = make_inputs(p, ranks, p.bind());
    const auto a = global_value(in.at("a"), ranks);
    const auto b = global_value(in.at("b"), ranks);
    const auto d = global_value(interpret(p, ranks, p.bind(), in).at("d"), ranks);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) {
        double acc = 0;
        for (int k = 0; k < 5; ++k)
          acc += a[static_cast<std::size_t>(i * 5 + k)] * b[static_cast<std::size_t>(k * 2 + j)];
        EXPECT_EQ(d[static_cast<std::size_t>(i * 2 + j)], acc) << ranks;
      }
  }
}

// ---- row reductions (issue 16)

Program rows_program(Layout x_layout, const std::string& reduce, bool complete) {
  ProgramBuilder b("rows");
  b.param("R", 5).param("C", 7).tensor("x", DType::f32, {"R", "C"}, x_layout).stmt("s = " + reduce + "(x)");
  if (complete) b.stmt(std::string("t = allreduce(") + (reduce == "rowmax" ? "max" : "sum") + ", s)");
  b.stmt(std::string("y = x - ") + (complete ? "t" : "s"));
  return b.output(complete ? "t" : "s").output("y").build();
}

// Row sums and maxima by hand over the global input, and x minus them broadcast back over the columns.
void expect_rows(const Program& p, const std::string& reduce, const std::string& result, int ranks) {
  const State in = make_inputs(p, ranks, p.bind());
  const State out = interpret(p, ranks, p.bind(), in);
  const auto x = global_value(in.at("x"), ranks);
  const auto s = global_value(out.at(result), ranks);
  const auto y = global_value(out.at("y"), ranks);
  ASSERT_EQ(s.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    double want = reduce == "rowmax" ? -INFINITY : 0.0;
    for (std::size_t j = 0; j < 7; ++j) want = reduce == "rowmax" ? std::max(want, x[i * 7 + j]) : want + x[i * 7 + j];
    EXPECT_EQ(s[i], want) << reduce << " row " << i << " P=" << ranks;
    for (std::size_t j = 0; j < 7; ++j) EXPECT_EQ(y[i * 7 + j], x[i * 7 + j] - want);
  }
}

TEST(RowReduce, KeepsTheReducedDimensionAsOneAndTheLayout) {
  const Program p = rows_program(Layout::sliced(0), "rowsum", false);
  const auto& s = p.find_stmt("s")->type;
  EXPECT_EQ(to_string(s.shape), "[R, 1]");
  EXPECT_EQ(s.layout, Layout::sliced(0));
  EXPECT_EQ(p.find_stmt("y")->type.shape, p.find_input("x")->type.shape);
  EXPECT_EQ(p.find_stmt("y")->type.layout, Layout::sliced(0));
  EXPECT_EQ(rows_program(Layout::replicated(), "rowmax", false).find_stmt("s")->type.layout, Layout::replicated());
  EXPECT_EQ(rows_program(Layout::local(), "rowmax", false).find_stmt("s")->type.layout, Layout::local());
  // Sliced along the reduced dimension: each rank's partial result.
  EXPECT_EQ(rows_program(Layout::sliced(1), "rowsum", true).find_stmt("s")->type.layout, Layout::local());
}

TEST(RowReduce, ReplicatedAndRowSlicedEqualTheHandComputedRows) {
  for (const std::string reduce : {"rowsum", "rowmax"})
    for (int ranks : {1, 2, 3, 4, 8}) {  // 8 > R: some ranks hold no rows
      expect_rows(rows_program(Layout::replicated(), reduce, false), reduce, "s", ranks);
      expect_rows(rows_program(Layout::sliced(0), reduce, false), reduce, "s", ranks);
    }
}

TEST(RowReduce, ColumnSlicedPartialResultsCompletedByAnAllreduce) {
  for (const std::string reduce : {"rowsum", "rowmax"})
    for (int ranks : {1, 2, 3, 4, 8}) {  // 8 > C: some ranks hold no columns (0 and -inf partials)
      expect_rows(rows_program(Layout::sliced(1), reduce, true), reduce, "t", ranks);
    }
}

TEST(RowReduce, OverTheLastDimensionOfAThreeDimensionalTensor) {
  const Program p = ProgramBuilder("rows3")
                        .param("B", 2)
                        .param("S", 3)
                        .param("H", 4)
                        .tensor("x", DType::f32, {"B", "S", "H"}, Layout::sliced(0))
                        .stmt("m = rowmax(x)")
                        .stmt("e = exp(x - m)")
                        .stmt("t = rowsum(e)")
                        .stmt("y = e / t")
                        .output("y")
                        .build();
  EXPECT_EQ(to_string(p.find_stmt("m")->type.shape), "[B, S, 1]");
  for (int ranks : {1, 2, 3}) {
    const auto y = global_value(interpret(p, ranks, p.bind(), make_inputs(p, ranks, p.bind())).at("y"), ranks);
    ASSERT_EQ(y.size(), 24u);
    for (std::size_t row = 0; row < 6; ++row) {  // a softmax: each row sums to 1
      double sum = 0;
      for (std::size_t k = 0; k < 4; ++k) sum += y[row * 4 + k];
      EXPECT_NEAR(sum, 1.0, 1e-15);
    }
  }
}

// ---- batched matmul (issue 16): a[Q, M, K] x b[Q, K, N] by hand, per layout rule

Program batched_program(Layout la, Layout lb, bool complete) {
  ProgramBuilder b("bmm");
  b.param("Q", 5).param("M", 3).param("K", 4).param("N", 2);
  b.tensor("a", DType::f32, {"Q", "M", "K"}, la).tensor("b", DType::f32, {"Q", "K", "N"}, lb);
  b.stmt("c = matmul(a, b)");
  if (complete) b.stmt("y = allreduce(sum, c)");
  return b.output(complete ? "y" : "c").build();
}

void expect_batched_product(const Program& p, const std::string& result, int ranks) {
  const State in = make_inputs(p, ranks, p.bind());
  const auto a = global_value(in.at("a"), ranks);
  const auto b = global_value(in.at("b"), ranks);
  const auto c = global_value(interpret(p, ranks, p.bind(), in).at(result), ranks);
  ASSERT_EQ(c.size(), 5u * 3 * 2);
  for (std::size_t q = 0; q < 5; ++q)
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 2; ++j) {
        double want = 0;
        for (std::size_t k = 0; k < 4; ++k) want += a[(q * 3 + i) * 4 + k] * b[(q * 4 + k) * 2 + j];
        EXPECT_EQ(c[(q * 3 + i) * 2 + j], want) << p.name << " q=" << q << " i=" << i << " j=" << j << " P=" << ranks;
      }
}

TEST(BatchedMatmul, LayoutRules) {
  const auto layout = [](Layout la, Layout lb) { return batched_program(la, lb, false).find_stmt("c")->type; };
  EXPECT_EQ(to_string(layout(Layout::replicated(), Layout::replicated()).shape), "[Q, M, N]");
  EXPECT_EQ(layout(Layout::sliced(0), Layout::sliced(0)).layout, Layout::sliced(0));  // heads over ranks
  EXPECT_EQ(layout(Layout::sliced(2), Layout::sliced(1)).layout, Layout::local());    // partial sums over K
  EXPECT_EQ(layout(Layout::replicated(), Layout::replicated()).layout, Layout::replicated());
  EXPECT_EQ(layout(Layout::local(), Layout::replicated()).layout, Layout::local());
  EXPECT_EQ(layout(Layout::sliced(1), Layout::replicated()).layout, Layout::sliced(1));  // rows of each product
  EXPECT_EQ(layout(Layout::replicated(), Layout::sliced(2)).layout, Layout::sliced(2));  // columns of each product
}

TEST(BatchedMatmul, EveryLayoutRuleEqualsTheHandComputedProducts) {
  for (int ranks : {1, 2, 3, 4, 8}) {  // 8 > Q: some ranks hold no batches (ragged, empty)
    expect_batched_product(batched_program(Layout::replicated(), Layout::replicated(), false), "c", ranks);
    expect_batched_product(batched_program(Layout::sliced(0), Layout::sliced(0), false), "c", ranks);
    expect_batched_product(batched_program(Layout::sliced(1), Layout::replicated(), false), "c", ranks);
    expect_batched_product(batched_program(Layout::replicated(), Layout::sliced(2), false), "c", ranks);
    expect_batched_product(batched_program(Layout::sliced(2), Layout::sliced(1), true), "y", ranks);
  }
}

TEST(BatchedMatmul, FourDimensionsShareBothLeadingDimensions) {
  const Program p = ProgramBuilder("bmm4")
                        .param("B", 2)
                        .param("H", 3)
                        .param("S", 2)
                        .tensor("a", DType::f32, {"B", "H", "S", "S"}, Layout::sliced(1))
                        .tensor("b", DType::f32, {"B", "H", "S", "S"}, Layout::sliced(1))
                        .stmt("c = matmul(a, b)")
                        .output("c")
                        .build();
  EXPECT_EQ(p.find_stmt("c")->type.layout, Layout::sliced(1));
  const State in1 = make_inputs(p, 1, p.bind());
  const auto want = global_value(interpret(p, 1, p.bind(), in1).at("c"), 1);
  for (int ranks : {2, 3}) {
    const State in = make_inputs(p, ranks, p.bind());
    EXPECT_EQ(global_value(interpret(p, ranks, p.bind(), in).at("c"), ranks), want) << "P=" << ranks;
  }
}

// ---- alltoall (issue 16): the same global tensor, re-sliced

TEST(Alltoall, ReSlicesTheSameGlobalTensor) {
  for (const auto& [from, to] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {0, 2}, {2, 1}}) {
    const Program p = ProgramBuilder("a2a")
                          .param("A", 5)
                          .param("B", 3)
                          .param("C", 4)
                          .tensor("x", DType::f32, {"A", "B", "C"}, Layout::sliced(from))
                          .stmt("y = alltoall(x, " + std::to_string(to) + ")")
                          .output("y")
                          .build();
    EXPECT_EQ(p.find_stmt("y")->type.layout, Layout::sliced(to));
    for (int ranks : {1, 2, 3, 4, 8}) {  // ragged, and empty slices at 8
      const State in = make_inputs(p, ranks, p.bind());
      const State out = interpret(p, ranks, p.bind(), in);
      EXPECT_EQ(global_value(out.at("y"), ranks), global_value(in.at("x"), ranks)) << from << "->" << to;
      // Each rank holds the slice sliced(to) gives it.
      for (int r = 0; r < ranks; ++r)
        EXPECT_EQ(static_cast<std::int64_t>(out.at("y").ranks[static_cast<std::size_t>(r)].size()),
                  numel(local_dims({5, 3, 4}, Layout::sliced(to), ranks, r)));
    }
  }
}

TEST(Elementwise, TanhAndGeluAreTheOpsMath) {
  const Program p = one_stmt(Layout::sliced(0), "tanh(x) - gelu(x * 0.5)");
  for (int ranks : {1, 3}) {
    const State in = make_inputs(p, ranks, p.bind());
    const auto x = global_value(in.at("x"), ranks);
    const auto y = global_value(interpret(p, ranks, p.bind(), in).at("y"), ranks);
    for (std::size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(y[i], std::tanh(x[i]) - apply_unary(UnaryOp::gelu, x[i] * 0.5));
  }
}

TEST(Elementwise, BroadcastsTrailingOperandsAndScalars) {
  const Program p = ProgramBuilder("bias")
                        .param("R", 3)
                        .param("H", 4)
                        .scalar("alpha", 0.5)
                        .tensor("x", DType::f32, {"R", "H"}, Layout::sliced(0))
                        .tensor("b", DType::f32, {"H"}, Layout::replicated())
                        .stmt("n = norm(b)")
                        .stmt("y = alpha * x + b / n")
                        .output("y")
                        .build();
  const State in = make_inputs(p, 2, p.bind());
  const auto x = global_value(in.at("x"), 2);
  const auto b = global_value(in.at("b"), 2);
  double sq = 0;
  for (double v : b) sq += v * v;
  const auto y = global_value(interpret(p, 2, p.bind(), in).at("y"), 2);
  for (std::size_t i = 0; i < 12; ++i)
    EXPECT_DOUBLE_EQ(y[i], 0.5 * x[i] + b[i % 4] / std::sqrt(sq));
}

TEST(Dropout, MaskIsTheSameOnSlicesAndOnTheWholeTensor) {
  const Program whole = one_stmt(Layout::replicated(), "dropout(x, 0.5)", {"M", "N"});
  const Program sliced = one_stmt(Layout::sliced(0), "dropout(x, 0.5)", {"M", "N"});
  const auto a = global_value(
      interpret(whole, 1, whole.bind(), make_inputs(whole, 1, whole.bind())).at("y"), 1);
  for (int ranks : {2, 3}) {
    const auto b = global_value(
        interpret(sliced, ranks, sliced.bind(), make_inputs(sliced, ranks, sliced.bind())).at("y"),
        ranks);
    EXPECT_EQ(a, b) << ranks;
  }
  const auto zeros = std::count(a.begin(), a.end(), 0.0);
  EXPECT_GT(zeros, 0);                            // the mask drops something ...
  EXPECT_LT(zeros, static_cast<long>(a.size()));  // ... and keeps something
}

TEST(Interpret, RelaysOutInputsWhoseLayoutChanged) {
  const Program rep = one_stmt(Layout::replicated(), "x * 3");
  const Program sli = one_stmt(Layout::sliced(0), "x * 3");
  const State in = make_inputs(rep, 3, rep.bind());
  const auto a = global_value(interpret(rep, 3, rep.bind(), in).at("y"), 3);
  const auto b = global_value(interpret(sli, 3, sli.bind(), in).at("y"), 3);
  EXPECT_EQ(a, b);
}

TEST(Interpret, MissingInputIsAUserError) {
  const Program p = one_stmt(Layout::replicated(), "x * 3");
  EXPECT_THROW((void)interpret(p, 2, p.bind(), State{}), UserError);
}

TEST(GlobalValue, ConcatenatesLocalValues) {
  const Program p = one_stmt(Layout::local(), "x * 1");
  const State in = make_inputs(p, 2, p.bind());
  const auto g = global_value(in.at("x"), 2);
  ASSERT_EQ(g.size(), 14u);
  EXPECT_EQ(std::vector<double>(g.begin() + 7, g.end()), in.at("x").ranks[1]);
}

TEST(GlobalValue, ReplicatedValuesMustAgree) {
  const Program p = one_stmt(Layout::replicated(), "x * 1");
  State in = make_inputs(p, 2, p.bind());
  in.at("x").ranks[1][0] += 1;
  EXPECT_THROW((void)global_value(in.at("x"), 2), InternalError);
}

TEST(Compare, AgreesWithItself) {
  const Program p = workload("lamb");
  const Bindings b = p.bind({{"N", 37}});
  const State out = interpret(p, 3, b, make_inputs(p, 3, b));
  EXPECT_TRUE(compare_outputs(p, out, out, 3).empty());
}

TEST(Compare, CatchesOnePerturbedElement) {
  const Program p = workload("adam");
  const Bindings b = p.bind({{"N", 37}});
  const State expected = interpret(p, 3, b, make_inputs(p, 3, b));
  State actual = expected;
  for (auto& part : actual.at("v1").ranks) part[20] *= 1.0 + 1e-9;  // still replicated
  const auto m = compare_outputs(p, expected, actual, 3);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].tensor, "v1");
  EXPECT_EQ(m[0].index, 20);
  EXPECT_NE(m[0].expected, m[0].actual);
}

TEST(Compare, ReportsAMissingOutput) {
  const Program p = workload("sgd");
  const Bindings b = p.bind({{"N", 37}});
  const State expected = interpret(p, 2, b, make_inputs(p, 2, b));
  State actual = expected;
  actual.erase("w1");
  const auto m = compare_outputs(p, expected, actual, 2);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].index, -1);
}

}  // namespace
}  // namespace coconet::model
