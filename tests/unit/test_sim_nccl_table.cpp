// NCCL's constants table (configs/nccl/<version>.yaml, sim/nccl_table.h):
// the loader's values and errors, and topologies that name a table by
// version: they read its values as if they stated them, state none of them
// themselves, and name file:line and the known versions when the table they
// name does not exist.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <string>

#include "model/catalog.h"
#include "model/error.h"
#include "sim/collective.h"
#include "sim/nccl_table.h"
#include "sim/topology.h"

namespace coconet::sim {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string table_text(const std::string& version) {
  return model::read_file(
      (std::filesystem::path(model::data_root()) / "configs/nccl" / (version + ".yaml")).string());
}

// `text` with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(NcclTable, TheVersionsAndTheirValues) {
  const auto versions = nccl_versions();
  EXPECT_EQ(versions, (std::vector<std::string>{"2.28", "2.30"}));
  const NcclTable& t = nccl_table("2.28");
  EXPECT_EQ(&t, &nccl_table("2.28")) << "read once";
  EXPECT_EQ(t.version, "2.28");
  EXPECT_TRUE(has(t.source, "v2.28.9-1")) << t.source;
  EXPECT_EQ(nccl_cpu_row("mixed"), "amd");
  EXPECT_EQ(nccl_cpu_row("arm"), "other");
}

TEST(NcclTable, AnUnknownVersionNamesTheKnownOnes) {
  const std::string e = error_of([] { (void)nccl_table("2.99"); });
  EXPECT_TRUE(has(e, "no NCCL table for version '2.99'")) << e;
  EXPECT_TRUE(has(e, "2.28 and 2.30")) << e;
}

TEST(NcclTable, ItsErrorsNameFileAndLine) {
  const std::string text = table_text("2.28");
  const std::pair<std::string, std::string> cases[][2] = {
      {{"  ll128: 0.92", "  ll128: 1.5"}, {"t.yaml:", "efficiency.ll128: is an efficiency"}},
      {{"  tree: 0.92", "  tree: 0"}, {"t.yaml:", "efficiency.tree: is an efficiency"}},
      {{"ring: {ll: 6.6,", "ring: {ll: -1,"}, {"t.yaml:", "a latency must be zero or more"}},
      {{"channel_GBps: 36.7", "channel_GBps: 0"},
       {"t.yaml:", "gpu_arch.hopper.channel_GBps: a bandwidth"}},
      {{"channel_GBps: 36.7", "channel_GBps: fast"}, {"t.yaml:", "is not a valid number"}},
      {{"efficiency:", "efficiencies:"}, {"t.yaml:", "unknown key 'efficiencies'"}},
      {{"  hopper: {", "  kepler: {"}, {"t.yaml:", "unknown key 'kepler'"}},
      {{"  other: {", "  intel: {"}, {"t.yaml:", "unknown key 'intel'"}},
      {{"\nversion: \"2.28\"", "\nrelease: \"2.28\""}, {"t.yaml:", "unknown key 'release'"}},
  };
  for (const auto& c : cases) {
    const std::string e = error_of(
        [&] { (void)parse_nccl_table(replaced(text, c[0].first, c[0].second), "t.yaml"); });
    EXPECT_TRUE(has(e, c[1].first) && has(e, c[1].second)) << c[0].second << ": " << e;
  }
  const std::string no_version = replaced(text, "version: \"2.28\"\n", "");
  EXPECT_TRUE(has(error_of([&] { (void)parse_nccl_table(no_version, "t.yaml"); }),
                  "needs the key 'version'"));
}

std::string topology_text(const std::string& name) {
  return model::read_file(model::resolve_topology(name));
}

// A topology names its table by version; a missing or unknown one is a
// located error that names the known versions.
TEST(NcclTable, ATopologyNamesItsTableByVersion) {
  const std::string text = topology_text("dgx-h100");
  const std::pair<std::string, std::string> cases[][2] = {
      {{"version: \"2.28\"", "version: \"2.99\""}, {"x.yaml:", "known versions are 2.28 and 2.30"}},
      {{"gpu_arch: hopper", "gpu_arch: kepler"},
       {"x.yaml:", "nccl.gpu_arch: 'kepler' is not one of"}},
      {{"host_cpu: intel", "host_cpu: sparc"}, {"x.yaml:", "nccl.host_cpu: 'sparc' is not one of"}},
      {{"  gpu_arch: hopper", "  #"}, {"x.yaml:", "nccl needs the key 'gpu_arch'"}},
      {{"  version: \"2.28\"", "  #"}, {"x.yaml:", "nccl.gpu_arch picks a row of an NCCL table"}},
  };
  for (const auto& c : cases) {
    const std::string e =
        error_of([&] { (void)parse_topology(replaced(text, c[0].first, c[0].second), "x.yaml"); });
    EXPECT_TRUE(has(e, c[1].first) && has(e, c[1].second)) << c[0].second << ": " << e;
  }
  // Without a version (and its rows) every constant is the topology's own, and it must state them.
  std::string bare = replaced(text, "  version: \"2.28\"", "  #");
  bare = replaced(bare, "  gpu_arch: hopper", "  #");
  bare = replaced(bare, "  host_cpu: intel", "  #");
  EXPECT_TRUE(has(error_of([&] { (void)parse_topology(bare, "x.yaml"); }), "needs the key"))
      << bare;
}

// What a base latency of the table does to a prediction (not the value read
// back from the file that sets it): a 1 KB allreduce over one DGX H100's 8
// GPUs, forced to one algorithm and protocol, pays its base latency once.
// Without a measured latency to pin the level (the topology's line removed),
// zeroing ring LL's base takes NCCL 2.28's baseLatencies[RING][LL] (6.6 us,
// src/graph/tuning.cc) off ring/LL and nothing off ring/simple; doubling
// tree LL's (6.8 us) adds 6.8 us to tree/LL.
TEST(NcclTable, ABaseLatencyIsPaidOnceByItsAlgorithmAndProtocol) {
  constexpr double kRingLl = 6.6, kTreeLl = 6.8;  // NCCL v2.28.9-1 tuning.cc baseLatencies
  std::string text = topology_text("dgx-h100");
  const auto at = text.find("  measured_latency:");
  ASSERT_NE(at, std::string::npos);
  text.erase(at, text.find('\n', at) - at + 1);
  const auto time = [&](const Overrides& o, model::Algo a, model::Proto p) {
    const Topology t = parse_topology(text, "x.yaml", o);
    return predict_collective(t, {model::OpKind::allreduce, 1024, place(t, 8), a, p}).time_us();
  };
  using model::Algo;
  using model::Proto;
  const Overrides ring_zero{{"nccl.base_latency_us.ring.ll", "0"}};
  EXPECT_NEAR(time({}, Algo::ring, Proto::ll) - time(ring_zero, Algo::ring, Proto::ll), kRingLl, 1e-9);
  EXPECT_NEAR(time({}, Algo::ring, Proto::simple) - time(ring_zero, Algo::ring, Proto::simple), 0, 1e-9);
  const Overrides tree_twice{{"nccl.base_latency_us.tree.ll", std::to_string(2 * kTreeLl)}};
  EXPECT_NEAR(time(tree_twice, Algo::tree, Proto::ll) - time({}, Algo::tree, Proto::ll), kTreeLl, 1e-9);
  // With the measured latency (3.5 us for ring/LL at 4 ranks) the level is
  // pinned: ring LL's base no longer moves ring/LL at all.
  const Topology pinned = load_topology("dgx-h100"), pinned_zero = load_topology("dgx-h100", ring_zero);
  const CollectiveRequest r{model::OpKind::allreduce, 1024, place(pinned, 8), Algo::ring, Proto::ll};
  EXPECT_NEAR(predict_collective(pinned, r).time_us(), predict_collective(pinned_zero, r).time_us(), 1e-9);
}

// The table's values are read as if the topology stated them; a value the
// topology states itself, or a --set, takes the table's place.
TEST(NcclTable, TheTopologyReadsTheTableAndMayReplaceAValue) {
  const Topology t = load_topology("dgx-h100");
  const NcclTable& n = nccl_table("2.28");
  EXPECT_EQ(t.nccl.version, "2.28");
  EXPECT_EQ(t.nccl.gpu_arch, "hopper");
  EXPECT_DOUBLE_EQ(t.nccl.ring_base_us.ll128, n.ring_base_us.ll128);
  EXPECT_DOUBLE_EQ(t.node.hop_latency_us.simple, n.nvlink_ring_hop_us.simple);
  EXPECT_DOUBLE_EQ(t.network.tree_hop_latency_us.ll, n.net_tree_hop_us.ll);
  EXPECT_DOUBLE_EQ(t.node.nccl_link_GBps, n.archs.at("hopper").nvlink_GBps);
  EXPECT_DOUBLE_EQ(t.nccl.ll_max_GBps(3), n.cpus.at("other").multi_node_GBps);
  EXPECT_DOUBLE_EQ(load_topology("dgx-a100").nccl.ll_max_GBps(2), n.cpus.at("amd").two_nodes_GBps);
  EXPECT_DOUBLE_EQ(load_topology("gb200-nvl72").nccl.channel_GBps, 40.0) << "gb200 names 2.30";
  EXPECT_DOUBLE_EQ(load_topology("dgx-h100", {{"nccl.ll_efficiency", "0.4"}}).nccl.ll_efficiency,
                   0.4);
  EXPECT_DOUBLE_EQ(load_topology("dgx-h100", {{"nccl.gpu_arch", "ampere"}, {"node.nvls", "false"}})
                       .nccl.channel_GBps,
                   20.0);
  // Ampere's NVLS efficiency is 0: with node.nvls the table's value is refused, placed at
  // nccl.version.
  const std::string ampere = error_of([] {
    (void)load_topology("dgx-h100", {{"nccl.gpu_arch", "ampere"}});
  });
  EXPECT_TRUE(has(ampere, "dgx-h100.yaml:") && has(ampere, "node.nvls_efficiency (NCCL 2.28"))
      << ampere;
  const std::string own =
      replaced(topology_text("dgx-h100"), "  channels: 16", "  channels: 16\n  channel_GBps: 11.5");
  EXPECT_DOUBLE_EQ(parse_topology(own, "x.yaml").nccl.channel_GBps, 11.5);
  // An error in a value the table gave is placed at the topology's nccl.version.
  const std::string e = error_of([] {
    (void)load_topology("dgx-h100", {{"node.nvlink_link_GBps", "10"}});
  });
  EXPECT_TRUE(has(e, "exceeds the line rate")) << e;
}

// grep finds NCCL's software constants in configs/nccl/ only: every GPU
// topology names a table and restates none of its keys.
TEST(NcclTable, ShippedTopologiesStateNoneOfTheTablesKeys) {
  const char* table_keys[][2] = {
      {"node", "nccl_link_GBps"},        {"node", "nvls_efficiency"},
      {"node", "hop_latency_us"},        {"node", "tree_hop_latency_us"},
      {"network", "hop_latency_us"},     {"network", "tree_hop_latency_us"},
      {"nccl", "channel_GBps"},          {"nccl", "ll_max_GBps"},
      {"nccl", "ll_efficiency"},         {"nccl", "ll128_efficiency"},
      {"nccl", "tree_efficiency"},       {"nccl", "tree_ll_efficiency"},
      {"nccl", "tree_ll128_efficiency"}, {"nccl", "base_latency_us"}};
  int gpu = 0;
  for (const std::string& name : model::list_names("configs/topologies")) {
    const YAML::Node root = YAML::LoadFile(model::resolve_topology(name));
    if (root["device"] && root["device"].as<std::string>() == "cpu")
      continue;  // calibrated: its own constants
    ++gpu;
    EXPECT_TRUE(root["nccl"]["version"]) << name << " names no NCCL table";
    for (const auto& [section, key] : table_keys)
      EXPECT_FALSE(root[section][key])
          << name << " states " << section << "." << key << ", the table's";
  }
  EXPECT_GE(gpu, 7);
}

}  // namespace
}  // namespace coconet::sim
