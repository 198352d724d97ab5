// Topologies: the shipped files load, their derived bandwidths are what the
// datasheets and NCCL's model say, overrides apply, and every constant in a
// shipped file carries a source comment.
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/error.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/predict.h"
#include "sim/topology.h"

namespace coconet::sim {
namespace {

const char* const kShipped[] = {"dgx2-v100", "dgx-a100",      "dgx-h100",        "dgx-h200",
                                "hgx-h100-4nic", "llama3-h100-roce", "gb200-nvl72"};

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
  EXPECT_NE(cpu.find("(GEMM 0."), std::string::npos) << cpu;  // cpu-local's f32 GEMM, 0.186 TFLOP/s (2026-12-06)
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

// The clusters of issue 29: their rates are the sourced ones, and the model
// reads what makes each different (fewer NICs, RoCE pods, a 72-GPU domain).
TEST(Topology, TodaysClusters) {
  const Topology h100 = load_topology("dgx-h100");
  const Topology four = load_topology("hgx-h100-4nic");
  EXPECT_EQ(four.network.nics, 4);
  EXPECT_DOUBLE_EQ(four.network.share_GBps(8), h100.network.share_GBps(8) / 2);  // two GPUs a NIC
  // What `coconet collective` prints for 2 nodes: the ring's bound falls from NVLink's to 4 NICs'.
  const auto ring_link = [](const Topology& t) {
    return predict_collective(t, {model::OpKind::allreduce, 1 << 30, place(t, 16), model::Algo::ring,
                                  model::Proto::simple}).link_GBps * bus_factor(model::OpKind::allreduce, 16);
  };
  EXPECT_NEAR(ring_link(h100), h100.node.nvlink_GBps(), 1e-9);
  EXPECT_NEAR(ring_link(four), 4 * four.network.nic_GBps(), 1e-9);
  // Meta's RoCE pods: a send between nodes of one pod at the NIC's rate, one
  // leaving its pod at 1/oversubscription of it (what the keys do, not what
  // they say: test_sim_collective holds the collectives across pods).
  const Topology roce = load_topology("llama3-h100-roce");
  ASSERT_GT(roce.network.oversubscription, 1);
  const auto send_GBps = [&](int distance) {
    return predict_collective(roce, {model::OpKind::send, 1 << 30, place_send(roce, distance)}).link_GBps;
  };
  EXPECT_NEAR(send_GBps(roce.network.pod_gpus) / send_GBps(roce.node.gpus), 1 / roce.network.oversubscription, 1e-9);
  EXPECT_NE(describe(roce).find("pods of 3072 GPUs, 1:7"), std::string::npos) << describe(roce);
  const Topology gb = load_topology("gb200-nvl72");
  EXPECT_TRUE(gb.node.nvls);
}

// A 72-GPU NVLink domain is one node: any group of up to 72 ranks stays on
// NVLink (NVLS where it pays), and a group over two racks crosses the network.
TEST(Topology, Nvl72DomainIsOneNode) {
  const Topology gb = load_topology("gb200-nvl72");
  for (int ranks : {2, 8, 16, 36, 64, 72}) {
    const Placement p = place(gb, ranks);
    EXPECT_EQ(p.nodes, 1) << ranks;
    EXPECT_TRUE(supported(gb, model::OpKind::allreduce, p, model::Algo::nvls, model::Proto::simple)) << ranks;
    const CollectiveCost c = predict_collective(gb, {model::OpKind::allreduce, 1 << 30, p});
    EXPECT_GT(c.time_us(), 0) << ranks;
    EXPECT_EQ(traffic_of(gb, {model::OpKind::allreduce, 1 << 30, p}, c).network, 0.0) << ranks;
  }
  // Eight GPUs: NVLink5 twice NVLink4's achievable rate, so a 1 GiB ring is faster than on DGX H100.
  const Topology h100 = load_topology("dgx-h100");
  const auto ring_us = [](const Topology& t, int ranks) {
    return predict_collective(t, {model::OpKind::allreduce, 1 << 30, place(t, ranks), model::Algo::ring}).time_us();
  };
  EXPECT_LT(ring_us(gb, 8), ring_us(h100, 8) * 0.6);
  const Placement racks = place(gb, 144);
  EXPECT_EQ(racks.nodes, 2);
  EXPECT_EQ(racks.per_node, 72);
  const CollectiveRequest across{model::OpKind::allreduce, 1 << 30, racks, model::Algo::ring};
  EXPECT_GT(traffic_of(gb, across, predict_collective(gb, across)).network, 0.0);
}

// gpu.tflops.fp8: an FP8 GEMM that its arithmetic bounds runs at the FP8
// rate where a topology states one (H100's twice its BF16 rate: 8192-cubed
// in a little over half the time, the operands' bytes the same order), scales
// with the other compute rates, and is refused where none is stated.
TEST(Topology, Fp8GemmsRunAtTheFp8Rate) {
  const Topology h100 = load_topology("dgx-h100");
  constexpr std::int64_t kCube = 8192;
  GemmShape g{kCube, kCube, kCube, model::DType::bf16};
  const double bf16_us = gemm_body_us(h100, g, h100.gpu.sms);
  g.fp8 = true;
  const double fp8_us = gemm_body_us(h100, g, h100.gpu.sms);
  EXPECT_NEAR(fp8_us / bf16_us, h100.gpu.tflops_bf16 / h100.gpu.tflops_fp8.value_or(0), 1e-9);
  EXPECT_LT(fp8_us, 0.6 * bf16_us);
  const Topology half = h100.scaled(RankScales{0.5, 1, 1, 1});
  EXPECT_NEAR(gemm_body_us(half, g, half.gpu.sms), 2 * fp8_us, 1e-6 * fp8_us);
  EXPECT_THROW((void)gemm_body_us(load_topology("dgx-a100"), g, 108), UserError);
  EXPECT_NE(describe(h100).find("fp8 1979"), std::string::npos);
  EXPECT_EQ(describe(load_topology("dgx-a100")).find("fp8"), std::string::npos);
}

// What `coconet predict --topology NAME` runs: the default experiment on each
// new topology, ranked, with a best schedule (on two nodes, as tests keep it short).
TEST(Topology, PredictRunsOnTodaysClusters) {
  for (const char* name : {"hgx-h100-4nic", "llama3-h100-roce", "gb200-nvl72"}) {
    PredictOptions o;
    o.topology = name;
    o.nodes = 2;
    const auto reports = predict_experiment(model::default_experiment(), o);
    ASSERT_FALSE(reports.empty()) << name;
    for (const auto& r : reports) {
      EXPECT_EQ(r.topology, name);
      ASSERT_FALSE(r.result.ranked.empty()) << name << " " << r.workload;
      EXPECT_GT(r.best().time_us, 0) << name << " " << r.workload;
    }
  }
}

}  // namespace
}  // namespace coconet::sim
