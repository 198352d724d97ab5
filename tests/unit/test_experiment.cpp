// Unit tests of experiments: parsing, size sweeps, --set assignments.
#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/error.h"
#include "model/experiment.h"
#include "model/parse.h"

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
