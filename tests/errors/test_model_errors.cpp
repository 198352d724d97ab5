// Inputs the front end must reject: each with a message that names the place
// and says what would be right. Every case asserts its message.
#include <gtest/gtest.h>

#include <string>

#include "model/error.h"
#include "model/experiment.h"
#include "model/parse.h"

using namespace coconet::model;

namespace {

// A valid workload with one line replaced, so each case differs from a good input by one thing.
const char* kGood = R"(name: t
params: {N: 16}
scalars: {lr: 0.1}
tensors:
  g: {dtype: f16, shape: [N], layout: local}
  w: {dtype: f32, shape: [N], layout: replicated}
program:
  - g1 = allreduce(sum, g)
  - w1 = update(w, w - lr*g1)
outputs: [w1]
)";

std::string with(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

std::string error_of(const std::string& yaml) {
  try {
    (void)parse_program(yaml, "t.yaml");
  } catch (const coconet::UserError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string experiment_error(const std::string& yaml) {
  try {
    (void)parse_experiment(yaml, "e.yaml");
  } catch (const coconet::UserError& e) {
    return e.what();
  }
  return "(accepted)";
}

#define EXPECT_REJECTED(yaml, ...)                                             \
  do {                                                                         \
    const std::string msg = error_of(yaml);                                    \
    for (const char* part : {__VA_ARGS__}) EXPECT_NE(msg.find(part), std::string::npos) \
        << "message: " << msg << "\nmissing: " << part;                        \
  } while (0)

}  // namespace

TEST(ModelErrors, TheGoodWorkloadIsAccepted) { EXPECT_EQ(error_of(kGood), "(accepted)"); }

TEST(ModelErrors, MalformedYaml) { EXPECT_REJECTED(with("[N]", "[N"), "t.yaml:", "malformed YAML"); }
TEST(ModelErrors, UnknownTopLevelKey) {
  EXPECT_REJECTED(with("outputs:", "outptus:"), "t.yaml:10:1", "unknown key 'outptus'", "known keys");
}
TEST(ModelErrors, UnknownTensorKey) {
  EXPECT_REJECTED(with("layout: local}", "layout: local, dtyp: f16}"), "t.yaml:5:", "unknown key 'dtyp'");
}
TEST(ModelErrors, UnknownDtype) { EXPECT_REJECTED(with("dtype: f16", "dtype: f8"), "t.yaml:5", "unknown dtype 'f8'", "f16, bf16 or f32"); }
TEST(ModelErrors, UnknownLayout) {
  EXPECT_REJECTED(with("layout: local", "layout: partial"), "unknown layout 'partial'", "sliced(D)");
}
TEST(ModelErrors, SlicedDimensionOutOfRange) {
  EXPECT_REJECTED(with("layout: replicated", "layout: sliced(1)"), "sliced(1)", "only 1 dimension");
}
TEST(ModelErrors, MissingShape) {
  EXPECT_REJECTED(with("shape: [N], layout: local", "layout: local"), "needs a shape");
}
TEST(ModelErrors, MalformedDimension) { EXPECT_REJECTED(with("shape: [N], layout: local", "shape: [N+1], layout: local"), "N+1", "B*S"); }
TEST(ModelErrors, SizeNotInParams) {
  EXPECT_REJECTED(with("shape: [N], layout: local", "shape: [M], layout: local"), "size 'M'", "params");
}
TEST(ModelErrors, NegativeSize) { EXPECT_REJECTED(with("{N: 16}", "{N: -4}"), "t.yaml:2", "must be positive"); }
TEST(ModelErrors, NonNumericScalar) { EXPECT_REJECTED(with("{lr: 0.1}", "{lr: fast}"), "t.yaml:3", "not a valid number"); }
TEST(ModelErrors, MissingProgram) {
  EXPECT_REJECTED(with("program:\n  - g1 = allreduce(sum, g)\n  - w1 = update(w, w - lr*g1)\n", ""),
                  "needs 'program'");
}
TEST(ModelErrors, MissingEquals) {
  EXPECT_REJECTED(with("g1 = allreduce", "g1 allreduce"), "t.yaml:8", "expected '='");
}
TEST(ModelErrors, UnknownFunction) {
  EXPECT_REJECTED(with("w - lr*g1", "w - lr*sinh(g1)"), "unknown function 'sinh'", "sqrt", "tanh", "gelu");
}
TEST(ModelErrors, UnknownReduction) {
  EXPECT_REJECTED(with("allreduce(sum, g)", "allreduce(avg, g)"), "unknown reduction 'avg'", "sum, max, min or mean");
}
TEST(ModelErrors, UnbalancedParenthesis) {
  EXPECT_REJECTED(with("w - lr*g1)", "(w - lr*g1)"), "t.yaml:9", "expected ')'");
}
TEST(ModelErrors, TrailingText) { EXPECT_REJECTED(with("w - lr*g1)", "w - lr*g1) g"), "unexpected text"); }
TEST(ModelErrors, UndefinedName) {
  EXPECT_REJECTED(with("w - lr*g1", "w - lr*g2"), "statement 'w1 = update(w, w - lr*g2)'", "'g2' is not defined");
}
TEST(ModelErrors, UseBeforeDefinition) {
  EXPECT_REJECTED(with("- g1 = allreduce(sum, g)\n  - w1 = update(w, w - lr*g1)",
                       "- w1 = update(w, w - lr*g1)\n  - g1 = allreduce(sum, g)"),
                  "'g1' is not defined");
}
TEST(ModelErrors, RedefinedName) {
  EXPECT_REJECTED(with("w1 = update", "g1 = update"), "'g1' is already defined", "new name");
}
TEST(ModelErrors, AllreduceOfReplicated) {
  EXPECT_REJECTED(with("allreduce(sum, g)", "allreduce(sum, w)"), "allreduce needs a local", "'w' is replicated");
}
TEST(ModelErrors, AllgatherOfLocal) {
  EXPECT_REJECTED(with("allreduce(sum, g)", "allgather(g)"), "allgather needs a sliced");
}
TEST(ModelErrors, LocalMixedIntoReplicatedState) {
  EXPECT_REJECTED(with("w - lr*g1", "w - lr*g"), "state 'w' is local", "reduce");
}
TEST(ModelErrors, UpdateOfUndeclaredTensor) {
  EXPECT_REJECTED(with("update(w,", "update(q,"), "update target 'q' is not a declared tensor");
}
TEST(ModelErrors, ShapeMismatch) {
  EXPECT_REJECTED(with("w: {dtype: f32, shape: [N]", "w: {dtype: f32, shape: [4]"), "does not broadcast", "trailing part");
}
TEST(ModelErrors, MatmulInnerDimensions) {
  EXPECT_REJECTED(with("- w1 = update(w, w - lr*g1)", "- w1 = matmul(g1, g1)"), "matmul needs a of rank >= 2");
}
TEST(ModelErrors, OutputNeverComputed) { EXPECT_REJECTED(with("outputs: [w1]", "outputs: [w9]"), "output 'w9'"); }
TEST(ModelErrors, DropoutProbabilityOutOfRange) {
  EXPECT_REJECTED(with("w - lr*g1", "dropout(w - lr*g1, 1.5)"), "dropout probability 1.5");
}
TEST(ModelErrors, ScalarUsedAsTensor) {
  EXPECT_REJECTED(with("allreduce(sum, g)", "allreduce(sum, lr)"), "'lr' is a scalar parameter");
}
TEST(ModelErrors, SendToANamedGroup) {
  EXPECT_REJECTED(with("allreduce(sum, g)", "send(g, prev)"), "send(x, next)");
}
TEST(ModelErrors, BadCast) { EXPECT_REJECTED(with("w - lr*g1", "cast(w - lr*g1, f64)"), "unknown dtype 'f64'"); }
TEST(ModelErrors, ShardableMustBeReplicated) {
  EXPECT_REJECTED(with("layout: local}", "layout: local, shardable: true}"), "shardable but local");
}
TEST(ModelErrors, MixedGroups) {
  EXPECT_REJECTED(with("layout: replicated}", "layout: replicated, group: 1}"), "process group");
}
TEST(ModelErrors, UpdateTwice) {
  EXPECT_REJECTED(with("outputs: [w1]", "  - w2 = update(w, w1)\noutputs: [w1]"), "updated twice");
}

// ---- row reductions and the transformer's activations (issue 16)

// A 2-D workload for the row reductions: x [R, C] with a layout given per case.
std::string rows_workload(const std::string& x_layout, const std::string& stmts, const std::string& outputs) {
  return "name: rows\nparams: {R: 8, C: 4}\ntensors:\n"
         "  x: {dtype: f32, shape: [R, C], layout: " + x_layout + "}\n"
         "  v: {dtype: f32, shape: [C, R], layout: replicated}\n"
         "program:\n" + stmts + "outputs: [" + outputs + "]\n";
}

TEST(ModelErrors, RowReductionOfAScalar) {
  EXPECT_REJECTED(with("w1 = update(w, w - lr*g1)", "w1 = update(w, w - lr*g1)\n  - n = norm(w1)\n  - s = rowsum(n)"),
                  "statement 's = rowsum(n)'", "rowsum reduces over the last dimension", "scalar");
}

TEST(ModelErrors, RowReductionInsideAnExpression) {
  EXPECT_REJECTED(rows_workload("replicated", "  - m = rowsum(x) / 4\n", "m"), "'rowsum(x)' is an operation",
                  "whole right-hand side", "NAME = rowsum(x)");
  EXPECT_REJECTED(rows_workload("replicated", "  - m = x - rowmax(x)\n", "m"), "unknown function 'rowmax'",
                  "only as the whole right-hand side");
}

TEST(ModelErrors, RowReductionOfAnExpression) {
  EXPECT_REJECTED(rows_workload("replicated", "  - m = rowsum(x * x)\n", "m"), "rowsum takes a tensor",
                  "statement of its own");
}

// A row reduction of a tensor sliced along the reduced dimension is each
// rank's partial result (local): mixing it with a sliced value is rejected
// with the fix, an allreduce completes it.
TEST(ModelErrors, PartialRowSumMixedWithSlices) {
  EXPECT_REJECTED(rows_workload("sliced(1)", "  - s = rowsum(x)\n  - y = x - s\n", "y"),
                  "statement 'y = x - s'", "layout mismatch", "local", "allreduce or reducescatter the local one first");
  EXPECT_EQ(error_of(rows_workload("sliced(1)", "  - s = rowsum(x)\n  - t = allreduce(sum, s)\n  - y = x - t\n", "y")),
            "(accepted)");
}

TEST(ModelErrors, RowSumDoesNotBroadcastAlongColumnsOfAnotherShape) {
  EXPECT_REJECTED(rows_workload("replicated", "  - s = rowsum(x)\n  - y = v - s\n", "y"),
                  "statement 'y = v - s'", "'s' has shape [R, 1] which does not broadcast against [C, R]",
                  "size-1 dimensions");
}

TEST(ModelErrors, BroadcastSlicedOperand) {
  // [R, 1] sliced along its size-1 dimension cannot stand for [R, C] sliced along C.
  EXPECT_REJECTED("name: b\nparams: {R: 8, C: 4}\ntensors:\n"
                  "  x: {dtype: f32, shape: [R, C], layout: sliced(1)}\n"
                  "  s: {dtype: f32, shape: [R, 1], layout: sliced(1)}\n"
                  "program:\n  - y = x - s\noutputs: [y]\n",
                  "statement 'y = x - s'", "'s' is sliced but broadcast");
}

// ---- batched matmul and alltoall (issue 16)

// a[Q, M, K] and b as given, one statement.
std::string bmm_workload(const std::string& a_layout, const std::string& b_shape, const std::string& b_layout,
                         const std::string& stmt = "c = matmul(a, b)") {
  return "name: bmm\nparams: {Q: 4, M: 3, K: 5, N: 2}\ntensors:\n"
         "  a: {dtype: f32, shape: [Q, M, K], layout: " + a_layout + "}\n"
         "  b: {dtype: f32, shape: " + b_shape + ", layout: " + b_layout + "}\n"
         "program:\n  - " + stmt + "\noutputs: [c]\n";
}

TEST(ModelErrors, BatchedMatmulBatchDimensionsDiffer) {
  EXPECT_REJECTED(bmm_workload("replicated", "[M, K, N]", "replicated"), "t.yaml:", "statement 'c = matmul(a, b)'",
                  "same batch dimensions", "got a [Q, M, K] and b [M, K, N]");
  EXPECT_REJECTED(bmm_workload("replicated", "[Q, Q, K, N]", "replicated"), "same batch dimensions");
}

TEST(ModelErrors, BatchedMatmulInnerDimensionsDiffer) {
  EXPECT_REJECTED(bmm_workload("replicated", "[Q, N, K]", "replicated"), "statement 'c = matmul(a, b)'",
                  "inner dimensions differ", "a's last dimension must equal b's next to last");
}

TEST(ModelErrors, BatchedMatmulLayoutWithoutARule) {
  // A batch dimension sliced on one operand only, on different dimensions, or a batch-sliced a with b whole.
  for (const auto& [la, lb] : std::vector<std::pair<std::string, std::string>>{
           {"sliced(0)", "replicated"}, {"replicated", "sliced(0)"}, {"sliced(0)", "sliced(1)"},
           {"sliced(2)", "replicated"}, {"local", "sliced(0)"}}) {
    const std::string rule = "no batched matmul layout rule for a " + la + " x b " + lb;
    EXPECT_REJECTED(bmm_workload(la, "[Q, K, N]", lb), "statement 'c = matmul(a, b)'", rule.c_str(),
                    "slice a batch dimension (0..0) of both operands alike");
  }
}

TEST(ModelErrors, AlltoallOfATensorThatIsNotSliced) {
  for (const std::string layout : {"replicated", "local"}) {
    const std::string what = "alltoall re-slices a sliced tensor, but 'a' is " + layout;
    EXPECT_REJECTED(bmm_workload(layout, "[Q]", "replicated", "c = alltoall(a, 1)"), "t.yaml:",
                    "statement 'c = alltoall(a, 1)'", what.c_str(), "slice it first");
  }
}

TEST(ModelErrors, AlltoallDimensionOutOfRange) {
  EXPECT_REJECTED(bmm_workload("sliced(0)", "[Q]", "replicated", "c = alltoall(a, 3)"),
                  "statement 'c = alltoall(a, 3)'", "alltoall dimension 3 is out of range", "3 dimension(s), 0..2");
  EXPECT_REJECTED(bmm_workload("sliced(0)", "[Q]", "replicated", "c = alltoall(a, -1)"),
                  "the dimension must be a whole number");
  EXPECT_REJECTED(bmm_workload("sliced(0)", "[Q]", "replicated", "c = alltoall(a, 1.5)"),
                  "the dimension must be a whole number");
}

TEST(ModelErrors, AlltoallToTheSlicedDimension) {
  EXPECT_REJECTED(bmm_workload("sliced(1)", "[Q]", "replicated", "c = alltoall(a, 1)"),
                  "statement 'c = alltoall(a, 1)'", "'a' is already sliced(1)", "move the slicing to another dimension");
}

TEST(ModelErrors, AlltoallWithoutADimension) {
  EXPECT_REJECTED(bmm_workload("sliced(0)", "[Q]", "replicated", "c = alltoall(a)"), "expected ','",
                  "write alltoall(x, DIM)");
}

TEST(ModelErrors, GeluTakesOneArgument) {
  EXPECT_REJECTED(with("w - lr*g1", "w - lr*gelu(g1, 2)"), "expected ')'", "gelu takes 1 argument");
}

TEST(ExperimentErrors, UnknownKey) {
  const auto msg = experiment_error("name: x\ntopolgy: dgx-h100\nworkloads: [{workload: adam}]\n");
  EXPECT_NE(msg.find("e.yaml:2:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'topolgy'"), std::string::npos) << msg;
}
TEST(ExperimentErrors, NonPositiveSweepValue) {
  const auto msg = experiment_error("workloads: [{workload: adam, sizes: {N: [4, 0]}}]\n");
  EXPECT_NE(msg.find("must be positive"), std::string::npos) << msg;
}
TEST(ExperimentErrors, NoWorkloads) {
  EXPECT_NE(experiment_error("name: x\n").find("needs 'workloads'"), std::string::npos);
}
TEST(ExperimentErrors, SizeTheWorkloadLacks) {
  const Experiment e = parse_experiment("workloads: [{workload: t, sizes: {Q: 3}}]\n", "e.yaml");
  try {
    (void)size_points(e.workloads[0], parse_program(kGood, "t.yaml"));
    FAIL() << "accepted";
  } catch (const coconet::UserError& err) {
    EXPECT_NE(std::string(err.what()).find("no such size"), std::string::npos);
  }
}
