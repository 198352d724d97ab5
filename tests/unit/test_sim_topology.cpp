// Topologies: the shipped files load, their derived bandwidths are what the
// datasheets and NCCL's model say, overrides apply, and every constant in a
// shipped file carries a source comment.
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "model/catalog.h"
#include "sim/topology.h"

namespace coconet::sim {
namespace {

const char* const kShipped[] = {"dgx2-v100", "dgx-a100", "dgx-h100", "dgx-h200"};

TEST(Topology, ShippedFilesLoad) {
  for (const char* name : kShipped) {
    const Topology t = load_topology(name);
    EXPECT_EQ(t.name, name);
    EXPECT_GT(t.total_gpus(), 0);
    EXPECT_FALSE(describe(t).empty());
  }
}

// The summary line gives a CPU topology's rates in its own magnitude (tens of
// GFLOP/s, not "0 TFLOP/s") and an f32 GEMM rate where the topology has one.
TEST(Topology, SummaryShowsEveryRateItUses) {
  const std::string cpu = describe(load_topology("cpu-local"));
  EXPECT_EQ(cpu.find("f16 0 /"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("(GEMM 0.0"), std::string::npos) << cpu;
  const std::string gpu = describe(load_topology("dgx-h100"));
  EXPECT_NE(gpu.find("f16 989"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("(GEMM"), std::string::npos) << gpu;
}

TEST(Topology, DerivedBandwidths) {
  const Topology h100 = load_topology("dgx-h100");
  EXPECT_NEAR(h100.node.nvlink_GBps(), 18 * 20.6, 1e-9);
  EXPECT_NEAR(h100.network.nic_GBps(), 400 / 8.0 * 0.96, 1e-9);
  EXPECT_TRUE(h100.node.nvls);
  const Topology v100 = load_topology("dgx2-v100");
  EXPECT_EQ(v100.node.gpus, 16);
  EXPECT_EQ(v100.nodes, 16);
  EXPECT_NEAR(v100.node.nvlink_GBps(), 120, 1e-9);
  EXPECT_FALSE(v100.node.nvls);
}

TEST(Topology, OverridesReplaceValues) {
  const Topology t = load_topology("dgx-h100", {{"nodes", "64"}, {"gpu.hbm_GBps", "4000"}, {"node.nvls", "false"}});
  EXPECT_EQ(t.nodes, 64);
  EXPECT_DOUBLE_EQ(t.gpu.hbm_GBps, 4000);
  EXPECT_FALSE(t.node.nvls);
  EXPECT_EQ(load_topology("dgx-h100").nodes, 4);
}

// Each line that sets a number must say where the number comes from.
std::vector<std::string> unsourced_lines(const std::string& text) {
  static const std::regex number_value(R"(:\s*[\[{]?\s*-?[0-9])");
  std::vector<std::string> bad;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto hash = line.find('#');
    const std::string code = line.substr(0, hash);
    if (std::regex_search(code, number_value) && hash == std::string::npos) bad.push_back(line);
  }
  return bad;
}

TEST(Topology, EveryConstantHasASource) {
  for (const char* name : kShipped) {
    const std::string text = model::read_file(model::resolve_topology(name));
    EXPECT_EQ(unsourced_lines(text), std::vector<std::string>{}) << name;
  }
}

TEST(Topology, SourceCheckCatchesAnUnsourcedConstant) {
  EXPECT_EQ(unsourced_lines("gpu:\n  sms: 132\n").size(), 1u);
  EXPECT_TRUE(unsourced_lines("gpu:\n  sms: 132  # whitepaper\n").empty());
}

}  // namespace
}  // namespace coconet::sim
