// Unit tests of experiments: parsing, size sweeps, --set assignments and values,
// the expansion into points.
#include <gtest/gtest.h>

#include "model/set_flag.h"
#include "model/catalog.h"
#include "model/error.h"
#include "model/experiment.h"
#include "model/parse.h"
#include "model/points.h"

using namespace coconet::model;

TEST(Experiment, DefaultParsesWithEveryWorkload) {
  const Experiment e = load_experiment(resolve_experiment("default"));
  EXPECT_EQ(e.topology, "dgx-h100");
  EXPECT_EQ(e.nodes.value_or(0), 4);
  EXPECT_EQ(e.workloads.size(), 6u);
  for (const auto& w : e.workloads) EXPECT_NO_THROW((void)load_program(resolve_workload(w.workload)));
}

TEST(Experiment, SweepsMultiply) {
  const Experiment e = parse_experiment(R"(
name: t
workloads:
  - workload: megatron_mlp
    sizes: {B: [8, 16], S: [512, 1024, 2048]}
)",
                                        "t.yaml");
  const Program p = load_program(resolve_workload("megatron_mlp"));
  const auto points = size_points(e.workloads[0], p);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].at("H"), 3072);  // untouched sizes keep their defaults
}

TEST(Experiment, Assignments) {
  EXPECT_EQ(parse_assignment("N=12"), (std::pair<std::string, std::string>{"N", "12"}));
  EXPECT_THROW((void)parse_assignment("N"), coconet::UserError);
  EXPECT_THROW((void)parse_assignment("=3"), coconet::UserError);
}

TEST(Counts, ExactIntegersWithBinarySuffixesAndExactDecimals) {
  EXPECT_EQ(parse_count("4096", "-b"), 4096);
  EXPECT_EQ(parse_count("4K", "-b"), 4096);
  EXPECT_EQ(parse_count("1M", "-b"), 1048576);
  EXPECT_EQ(parse_count("2g", "-b"), 2147483648);
  EXPECT_EQ(parse_count("1e6", "-b"), 1000000);
  EXPECT_EQ(parse_count("2.5e3", "-b"), 2500);
  EXPECT_EQ(parse_count("1.5K", "-b"), 1536);
  EXPECT_EQ(parse_count("9223372036854775807", "-b"), 9223372036854775807);
  for (const char* bad : {"1.5", "1e-3", "0", "-4", "abc", "", "4KB", " 4", "1e19", "9223372036854775808",
                          "8G1", "1e", ".e3"})
    EXPECT_THROW((void)parse_count(bad, "-b"), coconet::UserError) << bad;
}

TEST(Counts, MessagesNameTheFlag) {
  try {
    (void)parse_size("N", "abc");
    FAIL() << "accepted";
  } catch (const coconet::UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--set N=abc: ", 0), 0u) << e.what();
  }
  EXPECT_DOUBLE_EQ(parse_scalar("lr", "1e-3"), 1e-3);
  EXPECT_THROW((void)parse_scalar("lr", "fast"), coconet::UserError);
  EXPECT_THROW((void)parse_scalar("lr", "inf"), coconet::UserError);
}

TEST(Sets, DottedNamesAndNodesGoToTheTopology) {
  const SetArgs s = split_sets({"N=4", "gpu.hbm_GBps=10", "nodes=2", "lr=0.1"});
  EXPECT_EQ(s.workload, (Assignments{{"N", "4"}, {"lr", "0.1"}}));
  EXPECT_EQ(s.topology, (Assignments{{"gpu.hbm_GBps", "10"}, {"nodes", "2"}}));
}

TEST(Points, NamedWorkloadTakesTheDefaultExperimentsRanksAtItsOwnSizes) {
  const Experiment e = experiment_from_argument(std::string("megatron_mlp"));
  const auto points = expand(e, PointOptions{{}, std::nullopt, 32, ""});
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].ranks_per_group, 8);  // as the default experiment's entry: one node
  EXPECT_EQ(points[0].label, "B=8 H=3072 S=1024");
  const auto adam = expand(experiment_from_argument(std::string("adam")), PointOptions{{}, std::nullopt, 32, ""});
  EXPECT_EQ(adam[0].ranks_per_group, 32);  // no ranks in its entry: every GPU
}

TEST(Points, RanksIsTheWorldSize) {
  const Experiment e = experiment_from_argument(std::string("gpt3_pipeline"));
  const auto points = expand(e, PointOptions{{}, 16, 32, ""});
  EXPECT_EQ(points[0].groups, 2);
  EXPECT_EQ(points[0].ranks_per_group, 8);
  EXPECT_THROW((void)expand(e, PointOptions{{}, 3, 32, ""}), coconet::UserError);
  EXPECT_THROW((void)expand(e, PointOptions{{}, 64, 32, "a small machine"}), coconet::UserError);
}

TEST(Points, SetReplacesTheSweepAndSetsScalars) {
  const Experiment e = default_experiment();
  const auto points = expand(e, PointOptions{{{"N", "4K"}, {"lr", "0.5"}}, std::nullopt, 32, ""});
  int with_n = 0;
  for (const auto& p : points) {
    if (!p.sizes.contains("N")) continue;
    ++with_n;
    EXPECT_EQ(p.label, "N=4096");
    EXPECT_EQ(p.program.params.at("N"), 4096);
    if (p.program.scalars.contains("lr")) {
      EXPECT_EQ(p.program.scalars.at("lr"), 0.5);
    }
  }
  EXPECT_EQ(with_n, 3);  // sgd, adam, lamb: one point each instead of their sweep of two
}

TEST(Points, UnknownNameListsTheSizesAndScalars) {
  try {
    (void)expand(default_experiment(), PointOptions{{{"Q", "1"}}, std::nullopt, 32, ""});
    FAIL() << "accepted";
  } catch (const coconet::UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--set Q=1"), std::string::npos) << m;
    EXPECT_NE(m.find("sizes: B, H, N, S"), std::string::npos) << m;
    EXPECT_NE(m.find("lr"), std::string::npos) << m;
  }
}
