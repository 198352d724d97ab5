// Hostile input to the libraries (issue 14): each case is bounded at the
// boundary where it enters (parsing, the expansion into points, lowering, a
// topology) and rejected with a UserError whose message names the input and
// the limit of model/limits.h. None may crash, overflow or run unbounded.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "model/error.h"
#include "model/experiment.h"
#include "model/limits.h"
#include "model/parse.h"
#include "model/points.h"
#include "model/schedule.h"
#include "model/transforms.h"
#include "plan/capabilities.h"
#include "plan/step_plan.h"
#include "sim/topology.h"
#include "tests/paths.h"

using namespace coconet;
using namespace coconet::model;

namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string workload(const std::string& program_line, const std::string& extra_tensors = "",
                     const std::string& params = "{N: 16}") {
  return "name: t\nparams: " + params +
         "\nscalars: {lr: 0.1}\ntensors:\n  g: {dtype: f32, shape: [N], layout: local}\n" +
         extra_tensors + "program:\n  - g1 = allreduce(sum, g)\n  - " + program_line +
         "\noutputs: [y]\n";
}

template <typename F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

std::string parse_error(const std::string& yaml) {
  return user_error([&] { (void)parse_program(yaml, "t.yaml"); });
}

// --- expressions: depth and length ------------------------------------------

TEST(HostileExpr, NestedParenthesesStopAtTheDepthLimit) {
  const std::string e =
      parse_error(workload("y = " + repeat("(", 20000) + "g1" + repeat(")", 20000)));
  EXPECT_NE(e.find("deeper than the limit of 512"), std::string::npos) << e;
}

TEST(HostileExpr, NestedCallsStopAtTheDepthLimit) {
  const std::string e =
      parse_error(workload("y = " + repeat("sqrt(", 5000) + "g1" + repeat(")", 5000)));
  EXPECT_NE(e.find("deeper than the limit of 512"), std::string::npos) << e;
}

TEST(HostileExpr, UnaryMinusChainStopsAtTheDepthLimit) {
  const std::string e = parse_error(workload("y = " + repeat("-", 100000) + "g1"));
  EXPECT_NE(e.find("limit"), std::string::npos) << e;
}

TEST(HostileExpr, FlatSumDeeperThanTheLimitIsRejected) {
  const std::string e = parse_error(workload("y = g1" + repeat(" + g1", 5000)));
  EXPECT_NE(e.find("levels deep, more than the limit of 512"), std::string::npos) << e;
}

TEST(HostileExpr, LongStatementIsRejected) {
  const std::string e = parse_error(workload("y = g1" + repeat("+1", 40000)));
  EXPECT_NE(e.find("longer than the limit of 65536 characters"), std::string::npos) << e;
}

TEST(HostileExpr, DepthWithinTheLimitParses) {
  EXPECT_NO_THROW(
      (void)parse_program(workload("y = " + repeat("(", 200) + "g1" + repeat(")", 200)), "t.yaml"));
  EXPECT_NO_THROW((void)parse_program(workload("y = g1" + repeat(" + g1", 400)), "t.yaml"));
}

TEST(HostileExpr, InfiniteConstantIsRejected) {
  const std::string e = parse_error(workload("y = g1 * 1e999"));
  EXPECT_NE(e.find("not finite"), std::string::npos) << e;
}

TEST(HostileExpr, HugeRootIsRejectedWithoutOverflow) {
  const std::string e = parse_error(workload("y = broadcast(g1, 1e300)"));
  EXPECT_NE(e.find("the root must be a rank number"), std::string::npos) << e;
}

// --- programs -----------------------------------------------------------------

TEST(HostileProgram, TooManyStatementsAreRejected) {
  std::string yaml =
      "name: t\nparams: {N: 16}\ntensors:\n  g: {dtype: f32, shape: [N], layout: "
      "replicated}\nprogram:\n";
  for (std::size_t i = 0; i <= kMaxStatements; ++i) yaml += "  - y" + std::to_string(i) + " = g\n";
  yaml += "outputs: [y0]\n";
  const std::string e = parse_error(yaml);
  EXPECT_NE(e.find("more than the limit of 100000"), std::string::npos) << e;
}

TEST(HostileProgram, DuplicateOutputsAreRejected) {
  std::string yaml = workload("y = g1 * 2");
  yaml.replace(yaml.find("outputs: [y]"), 12, "outputs: [y, y]");
  const std::string e = parse_error(yaml);
  EXPECT_NE(e.find("output 'y' is listed twice"), std::string::npos) << e;
}

TEST(HostileProgram, NanScalarIsRejected) {
  std::string yaml = workload("y = g1 * lr");
  yaml.replace(yaml.find("{lr: 0.1}"), 9, "{lr: .nan}");
  const std::string e = parse_error(yaml);
  EXPECT_NE(e.find("scalar lr = nan must be a finite number"), std::string::npos) << e;
}

TEST(HostileProgram, HugeGroupIsRejected) {
  const std::string e = parse_error(
      workload("y = g1 * 2", "  h: {dtype: f32, shape: [N], layout: local, group: 2147483647}\n"));
  EXPECT_NE(e.find("more than the limit of 1024 process groups"), std::string::npos) << e;
}

// --- YAML ---------------------------------------------------------------------

TEST(HostileYaml, DuplicateKeysAreRejected) {
  std::string yaml = workload("y = g1 * 2");
  yaml = "name: other\n" + yaml;
  const std::string e = parse_error(yaml);
  EXPECT_NE(e.find("the key 'name' is given twice"), std::string::npos) << e;
  EXPECT_NE(e.find("t.yaml:2:1"), std::string::npos) << e;
}

TEST(HostileYaml, DuplicateSizeKeysAreRejected) {
  const std::string e = parse_error(workload("y = g1 * 2", "", "{N: 16, N: 32}"));
  EXPECT_NE(e.find("the key 'N' is given twice"), std::string::npos) << e;
}

// Found by fuzz_workload: a dimension that is not a single value escaped as a yaml-cpp exception.
TEST(HostileYaml, DimensionThatIsNotAValueIsAUserError) {
  std::string yaml = workload("y = g1 * 2");
  yaml.replace(yaml.find("shape: [N]"), 10, "shape: [N, [M], {a: b}, ~]");
  const std::string e = parse_error(yaml);
  EXPECT_NE(e.find("a dimension must be a single value"), std::string::npos) << e;
}

TEST(HostileYaml, KeysMustBePlainValues) {
  const std::string e = parse_error("~: 1\n" + workload("y = g1 * 2"));
  EXPECT_NE(e.find("a key must be a plain value"), std::string::npos) << e;
  const std::string f = parse_error("[a]: 1\n" + workload("y = g1 * 2"));
  EXPECT_NE(f.find("a key must be a plain value"), std::string::npos) << f;
}

TEST(HostileYaml, Utf8IsValidated) {
  EXPECT_EQ(first_invalid_utf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"), -1);
  EXPECT_EQ(first_invalid_utf8("\xc0\x80"), 0);      // overlong
  EXPECT_EQ(first_invalid_utf8("\xed\xa0\x80"), 0);  // a surrogate
  EXPECT_EQ(first_invalid_utf8("a\xe2\x82"), 1);     // cut short
  EXPECT_EQ(first_invalid_utf8("ab\xff"), 2);
  const std::string e = parse_error("name: \xff\n");
  EXPECT_NE(e.find("t.yaml: the file is not valid UTF-8 (byte 6 is 0xff)"), std::string::npos) << e;
}

TEST(HostileYaml, DeepNestingIsRejected) {
  const std::string e = parse_error("name: " + repeat("[", 1000) + repeat("]", 1000) + "\n");
  EXPECT_NE(e.find("t.yaml"), std::string::npos) << e;
}

TEST(HostileYaml, AliasBombIsRejected) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    yaml += fmt::format("a{0}: &a{0} [{1}{2}]\n", i, repeat(prev + ", ", 9), prev);
  }
  const std::string e = parse_error(yaml);
  EXPECT_NE(e.find("more than the limit of"), std::string::npos) << e;
}

// --- sizes: checked products ---------------------------------------------------

Program shaped(const std::string& shape, const std::string& params) {
  return parse_program("name: t\nparams: " + params +
                           "\ntensors:\n  g: {dtype: f32, shape: " + shape +
                           ", layout: local}\nprogram:\n  - y = allreduce(sum, g)\noutputs: [y]\n",
                       "t.yaml");
}

TEST(HostileSizes, ProductPast64BitsIsAUserError) {
  const Program p = shaped("[A*B]", "{A: 4294967296, B: 4294967296}");
  const std::string e = user_error([&] { check_tensor_sizes(p, "A=2^32 B=2^32", p.params); });
  EXPECT_NE(e.find("does not fit in 64 bits"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor 'g'"), std::string::npos) << e;
}

TEST(HostileSizes, TwoDimensionsPast64BitsAreAUserError) {
  const Program p = shaped("[A, B]", "{A: 4294967296, B: 4294967296}");
  const std::string e = user_error([&] { check_tensor_sizes(p, "A=2^32 B=2^32", p.params); });
  EXPECT_NE(e.find("does not fit in 64 bits"), std::string::npos) << e;
}

TEST(HostileSizes, TensorPastTheByteLimitIsRejected) {
  const Program p = shaped("[A, A]", "{A: 2097152}");
  const std::string e = user_error([&] { check_tensor_sizes(p, "A=2097152", p.params); });
  EXPECT_NE(e.find("more than the limit of 4398046511104 bytes"), std::string::npos) << e;
  // The campaign's case: elements fit in 64 bits, bytes do not.
  const Program q = shaped("[A, A]", "{A: 3037000499}");
  const std::string f = user_error([&] { check_tensor_sizes(q, "A=3037000499", q.params); });
  EXPECT_NE(f.find("bytes: 9223372030926249001 x 4 does not fit in 64 bits"), std::string::npos)
      << f;
}

TEST(HostileSizes, LoweringChecksTheSizes) {
  const Program p = shaped("[N]", "{N: 9223372036854775807}");
  const std::string e = user_error([&] {
    (void)plan::lower(initial_schedule(p), p.params, 2,
                      plan::capabilities_of(plan::BackendKind::cpu));
  });
  EXPECT_NE(e.find("does not fit in 64 bits"), std::string::npos) << e;
}

TEST(HostileSizes, ConstantFactorsAreChecked) {
  const std::string e = user_error([&] { (void)parse_dim("4294967296*4294967296"); });
  EXPECT_NE(e.find("does not fit in 64 bits"), std::string::npos) << e;
}

// --- experiments --------------------------------------------------------------

TEST(HostileExperiment, PointsPastTheLimitAreRejected) {
  std::string sweep;
  for (int i = 1; i <= 200; ++i) sweep += (i > 1 ? ", " : "") + std::to_string(i);
  const Experiment e =
      parse_experiment("name: x\nworkloads:\n  - workload: megatron_mlp\n    sizes: {B: [" + sweep +
                           "], S: [" + sweep + "], H: [" + sweep + "]}\n",
                       "x.yaml");
  const std::string msg = user_error([&] { (void)expand(e, {}); });
  EXPECT_NE(msg.find("more than the limit of 10000 points"), std::string::npos) << msg;
  EXPECT_NE(msg.find("B (200 values) x H (200 values)"), std::string::npos) << msg;
}

// --- lowering: ranks, chunks, channels, roots ------------------------------------

Schedule with_root(int root) {
  const Program p = parse_program(
      "name: t\nparams: {N: 16}\ntensors:\n  w: {dtype: f32, shape: [N], layout: replicated}\n"
      "program:\n  - y = broadcast(w, " +
          std::to_string(root) + ")\noutputs: [y]\n",
      "t.yaml");
  return initial_schedule(p);
}

TEST(HostileLowering, BroadcastRootOutsideTheGroupIsRejected) {
  const Schedule s = with_root(99);
  const std::string e = user_error([&] {
    (void)plan::lower(s, s.program.params, 2, plan::capabilities_of(plan::BackendKind::cpu));
  });
  EXPECT_NE(e.find("root 99 is not a rank of a group of 2 ranks"), std::string::npos) << e;
}

TEST(HostileLowering, ChannelsAndChunksOutOfRangeAreRejected) {
  Schedule s = with_root(0);
  s.knobs.channels = -4;
  std::string e = user_error([&] {
    (void)plan::lower(s, s.program.params, 2, plan::capabilities_of(plan::BackendKind::cpu));
  });
  EXPECT_NE(e.find("channels = -4 is out of range"), std::string::npos) << e;
  s.knobs.channels = 2147483647;
  e = user_error([&] {
    (void)plan::lower(s, s.program.params, 2, plan::capabilities_of(plan::BackendKind::cpu));
  });
  EXPECT_NE(e.find("between 0 and 64"), std::string::npos) << e;
  s.knobs.channels = 0;
  s.knobs.chunks = 10000000;
  e = user_error([&] {
    (void)plan::lower(s, s.program.params, 2, plan::capabilities_of(plan::BackendKind::cpu));
  });
  EXPECT_NE(e.find("chunks = 10000000 is out of range"), std::string::npos) << e;
}

TEST(HostileLowering, RanksPastTheLimitAreRejected) {
  const Schedule s = with_root(0);
  const std::string e = user_error([&] {
    (void)plan::lower(s, s.program.params, 1 << 30, plan::capabilities_of(plan::BackendKind::cpu));
  });
  EXPECT_NE(e.find("ranks per process group = 1073741824 is out of range"), std::string::npos) << e;
}

// --- topologies ---------------------------------------------------------------

TEST(HostileTopology, NodesPastTheLimitAreRejected) {
  const std::string e = user_error([] {
    (void)sim::load_topology("dgx-h100", {{"nodes", "1000000000"}});
  });
  EXPECT_NE(e.find("nodes"), std::string::npos) << e;
  EXPECT_NE(e.find("more than the limit of 65536"), std::string::npos) << e;
}

TEST(HostileTopology, GpusInAllPastTheLimitAreRejected) {
  const std::string e = user_error([] {
    (void)sim::load_topology("dgx-h100", {{"nodes", "2048"}, {"node.gpus", "1024"}});
  });
  EXPECT_NE(e.find("GPUs, more than the limit of 1048576"), std::string::npos) << e;
}

TEST(HostileTopology, NodesPast32BitsAreRejected) {
  const std::string e = user_error([] {
    (void)sim::load_topology("dgx-h100", {{"nodes", "9223372036854775807"}});
  });
  EXPECT_NE(e.find("more than the limit of 65536"), std::string::npos) << e;
}

// --- schedules ------------------------------------------------------------------

TEST(HostileSchedule, EditedStagesAreRejected) {
  const Program p = load_program(coconet::test::source_root() + "/workloads/sgd.yaml");
  std::string text = to_yaml(initial_schedule(p));
  EXPECT_NO_THROW((void)schedule_from_yaml(p, text, "s.yaml"));
  const auto at = text.find("stages:");
  ASSERT_NE(at, std::string::npos) << text;
  text = text.substr(0, at) + "stages: [garbage]\noverlaps: []\n";
  const std::string e = user_error([&] { (void)schedule_from_yaml(p, text, "s.yaml"); });
  EXPECT_NE(e.find("the file's stages are [garbage]"), std::string::npos) << e;
}

TEST(HostileSchedule, DuplicateKeysAreRejected) {
  const Program p = load_program(coconet::test::source_root() + "/workloads/sgd.yaml");
  const std::string e =
      user_error([&] { (void)schedule_from_yaml(p, "workload: sgd\nworkload: sgd\n", "s.yaml"); });
  EXPECT_NE(e.find("the key 'workload' is given twice"), std::string::npos) << e;
}

// --- scalars and timeouts --------------------------------------------------------

TEST(HostileScalars, TimeoutsMustBeFinitePositiveAndBounded) {
  EXPECT_NE(user_error([] {
              check_timeout(std::nan(""), "--timeout");
            }).find("--timeout = nan must be a finite"),
            std::string::npos);
  EXPECT_NE(user_error([] { check_timeout(0, "--timeout"); }).find("must be positive"),
            std::string::npos);
  EXPECT_NE(user_error([] { check_timeout(1e300, "--timeout"); }).find("more than the limit"),
            std::string::npos);
  EXPECT_NO_THROW(check_timeout(60, "--timeout"));
}

}  // namespace
