// Topologies that must be rejected: unknown keys, missing keys, impossible
// values, bad overrides. Each error names the place (file:line, or the
// override) and the rule.
#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/error.h"
#include "sim/compute.h"
#include "sim/topology.h"

namespace coconet::sim {
namespace {

std::string shipped() { return model::read_file(model::resolve_topology("dgx-h100")); }

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The message of the UserError that parsing `text` throws ("" when it parses).
std::string error_of(const std::string& text, const Overrides& o = {}) {
  try {
    (void)parse_topology(text, "t.yaml", o);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(TopologyErrors, ValidTopologyParses) { EXPECT_EQ(error_of(shipped()), ""); }

TEST(TopologyErrors, UnknownKeyNamesFileAndLine) {
  const std::string msg = error_of(replace(shipped(), "  sms: 132", "  smz: 132"));
  EXPECT_NE(msg.find("t.yaml:9:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'smz'"), std::string::npos) << msg;
}

TEST(TopologyErrors, UnknownTopLevelKey) {
  EXPECT_NE(error_of(shipped() + "colour: blue\n").find("unknown key 'colour'"), std::string::npos);
}

TEST(TopologyErrors, MissingKey) {
  const std::string msg = error_of(replace(shipped(), "  launch_us: 3.0", "  "));
  EXPECT_NE(msg.find("needs the key 'launch_us'"), std::string::npos) << msg;
}

TEST(TopologyErrors, ImpossibleValues) {
  const std::string neg = error_of(replace(shipped(), "  sms: 132", "  sms: -4"));
  EXPECT_NE(neg.find("t.yaml:9:"), std::string::npos) << neg;
  EXPECT_NE(neg.find("gpu.sms"), std::string::npos) << neg;
  EXPECT_NE(error_of(replace(shipped(), "hbm_efficiency: 0.90", "hbm_efficiency: 1.5")).find("efficiency"),
            std::string::npos);
  // NCCL's per-link rate and NVLS efficiency come from its table (configs/nccl/); stated in the
  // topology they replace the table's, and are checked where they are stated.
  const std::string above = error_of(replace(shipped(), "  nvls: true", "  nccl_link_GBps: 30\n  nvls: true"));
  EXPECT_NE(above.find("exceeds the line rate"), std::string::npos) << above;
  EXPECT_NE(above.find("t.yaml:"), std::string::npos) << above;
  EXPECT_NE(error_of(replace(shipped(), "  nvls: true", "  nvls: true\n  nvls_efficiency: 0")).find("nvls_efficiency"),
            std::string::npos);
  EXPECT_NE(error_of(replace(shipped(), "nodes: 4 ", "nodes: 0 ")).find("at least 1"), std::string::npos);
  EXPECT_NE(error_of(replace(shipped(), "nic_Gbps: 400", "nic_Gbps: fast")).find("not a valid number"),
            std::string::npos);
}

TEST(TopologyErrors, ConcurrencyAndReductionKeys) {
  EXPECT_NE(error_of(replace(shipped(), "reduce_GBps: 32400", "reduce_GBps: 0")).find("nccl.reduce_GBps"),
            std::string::npos);
  EXPECT_NE(error_of(replace(shipped(), "sms_per_channel: 1 ", "sms_per_channel: -1 ")).find("nccl.sms_per_channel"),
            std::string::npos);
}

// A topology describes hardware: what a backend runs is its capabilities
// (plan/capabilities.h), so the keys that once said it are unknown now.
TEST(TopologyErrors, BackendPropertiesAreNotTopologyKeys) {
  const std::string old = replace(shipped(), "  sms_per_channel: 1 ", "  resident_overlap: true\n  sms_per_channel: 1 ");
  EXPECT_NE(error_of(old).find("unknown key 'resident_overlap'"), std::string::npos) << error_of(old);
}

TEST(TopologyErrors, DeviceIsGpuOrCpu) {
  const std::string bad = replace(shipped(), "\nnodes:", "\ndevice: tpu\nnodes:");
  EXPECT_NE(error_of(bad).find("write gpu or cpu"), std::string::npos) << error_of(bad);
}

TEST(TopologyErrors, MalformedYaml) {
  EXPECT_NE(error_of("name: [unclosed\n").find("malformed YAML"), std::string::npos);
}

TEST(TopologyErrors, BadOverrides) {
  EXPECT_NE(error_of(shipped(), {{"gpu.hbm_gbps", "1"}}).find("no key 'hbm_gbps' under gpu"), std::string::npos);
  EXPECT_NE(error_of(shipped(), {{"gpu", "1"}}).find("is a section"), std::string::npos);
  const std::string msg = error_of(shipped(), {{"nodes", "-2"}});
  EXPECT_NE(msg.find("--set nodes"), std::string::npos) << msg;
}

TEST(TopologyErrors, UnknownTopologyName) {
  try {
    (void)load_topology("dgx-h900");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("dgx-h100"), std::string::npos) << e.what();
  }
}

// The asymmetry keys: each bad value names file:line (the shipped file has
// 40-odd lines, so an appended key's line is the file's length + its own).
int lines_of(const std::string& text) { return int(std::count(text.begin(), text.end(), '\n')); }

std::string at_line(int line) { return fmt::format("t.yaml:{}:", line); }

TEST(TopologyErrors, AsymmetryParses) {
  const Topology t = parse_topology(shipped() +
                                        "last_node_gpus: 4\n"
                                        "node_overrides:\n  - {node: 3, compute_scale: 0.5, network_scale: 0.25}\n"
                                        "stragglers:\n  - {rank: 17, hbm_scale: 0.5}\n",
                                    "t.yaml");
  EXPECT_EQ(t.asymmetry.last_node_gpus, 4);
  EXPECT_EQ(t.total_gpus(), t.nodes * t.node.gpus - 4);
  EXPECT_EQ(t.scales_of(3 * t.node.gpus).compute, 0.5);
  EXPECT_EQ(t.scales_of(3 * t.node.gpus).network, 0.25);
  EXPECT_EQ(t.scales_of(17).hbm, 0.5);
  EXPECT_EQ(t.scales_of(16), RankScales{});
  const std::string d = describe(t);
  EXPECT_NE(d.find("last node: 4 GPUs"), std::string::npos) << d;
  EXPECT_NE(d.find("rank 17: compute x1, HBM x0.5"), std::string::npos) << d;
  EXPECT_EQ(describe(parse_topology(shipped(), "t.yaml")).find("rank "), std::string::npos);
}

TEST(TopologyErrors, BadAsymmetryNamesFileAndLine) {
  const std::string base = shipped();
  const int n = lines_of(base);
  struct Case {
    std::string yaml;
    int line;  // of the bad value, counted from the end of the shipped file
    const char* says;
  };
  const Case cases[] = {
      {"last_node_gpus: 9\n", 1, "more than node.gpus"},
      {"last_node_gpus: 0\n", 1, "at least 1"},
      {"stragglers: {rank: 1}\n", 1, "must be a list"},
      {"stragglers:\n  - {rank: 1}\n", 2, "states no scale"},
      {"stragglers:\n  - {rank: 1, compute_scale: 0}\n", 2, "positive"},
      {"stragglers:\n  - {rank: 1, compute_scale: -0.5}\n", 2, "positive"},
      {"stragglers:\n  - {rank: 1, compute_scale: slow}\n", 2, "not a valid number"},
      {"stragglers:\n  - {rank: 1, speed: 0.5}\n", 2, "unknown key 'speed'"},
      {"stragglers:\n  - {compute_scale: 0.5}\n", 2, "needs the key 'rank'"},
      {"stragglers:\n  - {rank: 32, compute_scale: 0.5}\n", 2, "not a rank of this topology (0 to 31)"},
      {"stragglers:\n  - {rank: 1, compute_scale: 0.5}\n  - {rank: 1, hbm_scale: 0.5}\n", 3, "listed twice"},
      {"node_overrides:\n  - {node: 4, compute_scale: 0.5}\n", 2, "not a node of this topology (0 to 3)"},
      {"node_overrides:\n  - 3\n", 2, "must be a map"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(base + c.yaml);
    EXPECT_NE(msg.find(at_line(n + c.line)), std::string::npos) << c.yaml << " -> " << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << c.yaml << " -> " << msg;
  }
  // The last node's size bounds the stragglers' ranks.
  const std::string msg = error_of(base + "last_node_gpus: 4\nstragglers:\n  - {rank: 28, compute_scale: 0.5}\n");
  EXPECT_NE(msg.find("(0 to 27)"), std::string::npos) << msg;
}

TEST(TopologyErrors, AsymmetryThroughSet) {
  const Topology t = parse_topology(shipped(), "t.yaml", {{"stragglers", "[{rank: 17, compute_scale: 0.5}]"},
                                                         {"last_node_gpus", "2"}});
  EXPECT_EQ(t.scales_of(17).compute, 0.5);
  EXPECT_EQ(t.total_gpus(), 26);
  const std::string range = error_of(shipped(), {{"stragglers", "[{rank: 99, compute_scale: 0.5}]"}});
  EXPECT_NE(range.find("--set stragglers"), std::string::npos) << range;
  EXPECT_NE(range.find("not a rank"), std::string::npos) << range;
  const std::string yaml = error_of(shipped(), {{"node_overrides", "[{node: 1"}});
  EXPECT_NE(yaml.find("--set node_overrides"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("malformed YAML"), std::string::npos) << yaml;
  const std::string deep = error_of(shipped(), {{"stragglers", std::string(5000, '[') + std::string(5000, ']')}});
  EXPECT_NE(deep.find("--set stragglers"), std::string::npos) << deep.substr(0, 300);
  const std::string scale = error_of(shipped(), {{"node_overrides", "[{node: 1, nvlink_scale: 0}]"}});
  EXPECT_NE(scale.find("--set node_overrides: node_overrides[0].nvlink_scale"), std::string::npos) << scale;
}

TEST(TopologyErrors, InterferenceIsZeroOrMore) {
  const std::string msg = error_of(replace(shipped(), "interference: 0.045", "interference: -1"));
  EXPECT_NE(msg.find("nccl.interference"), std::string::npos) << msg;
  EXPECT_NE(msg.find("zero or more"), std::string::npos) << msg;
}

// nccl.alltoall_efficiency: each share in (0, 1], no other key.
TEST(TopologyErrors, AllToAllEfficiencyIsAShareOfTheLinksRate) {
  const std::string from = "alltoall_efficiency: {nvlink: 0.82, network: 0.86}";
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"alltoall_efficiency: {nvlink: 1.2, network: 0.86}", "nccl.alltoall_efficiency.nvlink"},
           {"alltoall_efficiency: {nvlink: 0.82, network: 0}", "nccl.alltoall_efficiency.network"},
           {"alltoall_efficiency: {nvlink: 0.82, nic: 0.86}", "nic"},
           {"alltoall_efficiency: 0.8", "nccl.alltoall_efficiency"}}) {
    const std::string text = replace(shipped(), from, bad);
    ASSERT_NE(text, shipped()) << "the shipped topology has no " << from;
    const std::string msg = error_of(text);
    EXPECT_NE(msg.find(says), std::string::npos) << bad << ": " << msg;
  }
}

// network.pod_gpus and network.oversubscription (as llama3-h100-roce states
// them): each bad value names the file, the line and the key.
std::string pods() { return model::read_file(model::resolve_topology("llama3-h100-roce")); }

// The line of pods() that starts with `key` (1-based), as text.
std::string line_of(const std::string& key) {
  std::istringstream in(pods());
  int n = 0;
  for (std::string l; std::getline(in, l);) {
    ++n;
    if (l.rfind("  " + key, 0) == 0) return std::to_string(n);
  }
  return "none";
}

void expect_pod_error(const std::string& from, const std::string& to, const std::string& line,
                      const std::string& key, const std::string& words) {
  const std::string msg = error_of(replace(pods(), from, to));
  EXPECT_NE(msg.find("t.yaml:" + line + ":"), std::string::npos) << to << ": " << msg;
  EXPECT_NE(msg.find(key), std::string::npos) << to << ": " << msg;
  EXPECT_NE(msg.find(words), std::string::npos) << to << ": " << msg;
}

TEST(TopologyErrors, PodKeysParse) {
  EXPECT_EQ(error_of(pods()), "");
  const Topology t = parse_topology(pods(), "t.yaml");
  EXPECT_EQ(t.network.pod_gpus, 3072);
  EXPECT_DOUBLE_EQ(t.network.oversubscription, 7.0);
  const Topology flat = parse_topology(shipped(), "t.yaml");  // absent: one flat network
  EXPECT_EQ(flat.network.pod_gpus, 0);
  EXPECT_DOUBLE_EQ(flat.network.oversubscription, 1.0);
}

TEST(TopologyErrors, BadPodSizes) {
  const std::string pod = "  pod_gpus: 3072 ";
  expect_pod_error(pod, "  pod_gpus: 0 ", line_of("pod_gpus:"), "network.pod_gpus", "at least 1");
  expect_pod_error(pod, "  pod_gpus: -8 ", line_of("pod_gpus:"), "network.pod_gpus", "at least 1");
  expect_pod_error(pod, "  pod_gpus: many ", line_of("pod_gpus:"), "network.pod_gpus", "not a valid");
  expect_pod_error(pod, "  pod_gpus: .inf ", line_of("pod_gpus:"), "network.pod_gpus", "not a valid");
  expect_pod_error(pod, "  pod_gpus: 4 ", line_of("pod_gpus:"), "network.pod_gpus", "whole number of nodes");  // smaller than a node
  expect_pod_error(pod, "  pod_gpus: 3076 ", line_of("pod_gpus:"), "network.pod_gpus", "whole number of nodes");
}

TEST(TopologyErrors, BadOversubscription) {
  const std::string over = "  oversubscription: 7 ";
  expect_pod_error(over, "  oversubscription: 0 ", line_of("oversubscription:"), "network.oversubscription", "positive number");
  expect_pod_error(over, "  oversubscription: -7 ", line_of("oversubscription:"), "network.oversubscription", "positive number");
  expect_pod_error(over, "  oversubscription: lots ", line_of("oversubscription:"), "network.oversubscription", "not a valid number");
  expect_pod_error(over, "  oversubscription: .inf ", line_of("oversubscription:"), "network.oversubscription", "positive number");
  expect_pod_error(over, "  oversubscription: .nan ", line_of("oversubscription:"), "network.oversubscription", "positive number");
  expect_pod_error(over, "  oversubscription: 0.5 ", line_of("oversubscription:"), "network.oversubscription", "below 1");
}

TEST(TopologyErrors, PodKeysGoTogether) {
  const std::string no_over = replace(pods(), "  oversubscription: 7 ", "  # oversubscription: 7 ");
  EXPECT_NE(error_of(no_over).find("go together"), std::string::npos) << error_of(no_over);
  EXPECT_NE(error_of(no_over).find("t.yaml:" + line_of("pod_gpus:") + ":"), std::string::npos) << error_of(no_over);
  const std::string no_pod = replace(pods(), "  pod_gpus: 3072 ", "  # pod_gpus: 3072 ");
  EXPECT_NE(error_of(no_pod).find("t.yaml:" + line_of("oversubscription:") + ":"), std::string::npos) << error_of(no_pod);
  // --set meets the same rules and names itself.
  const std::string set = error_of(pods(), {{"network.oversubscription", "0"}});
  EXPECT_NE(set.find("--set network.oversubscription"), std::string::npos) << set;
}

// gpu.tflops.fp8 is optional; where given it is a positive rate.
TEST(TopologyErrors, Fp8Rate) {
  const std::string zero = error_of(replace(shipped(), "fp8: 1979}", "fp8: 0}"));
  EXPECT_NE(zero.find("t.yaml:13:"), std::string::npos) << zero;
  EXPECT_NE(zero.find("gpu.tflops.fp8"), std::string::npos) << zero;
  EXPECT_NE(error_of(replace(shipped(), "fp8: 1979}", "fp8: fast}")).find("not a valid number"), std::string::npos);
  EXPECT_EQ(error_of(replace(shipped(), ", fp8: 1979}", "}")), "");
}

// gpu.attention_efficiency and attention_bwd_efficiency are optional
// fractions; without the backward's the forward's is used.
TEST(TopologyErrors, AttentionEfficiencies) {
  const Topology t = parse_topology(shipped(), "t.yaml", {});
  EXPECT_DOUBLE_EQ(t.gpu.flash_efficiency(), 0.62);
  EXPECT_DOUBLE_EQ(t.gpu.flash_bwd_efficiency(), 0.565);
  const std::string high = error_of(replace(shipped(), "attention_bwd_efficiency: 0.565", "attention_bwd_efficiency: 1.5"));
  EXPECT_NE(high.find("t.yaml:16:"), std::string::npos) << high;
  EXPECT_NE(high.find("gpu.attention_bwd_efficiency"), std::string::npos) << high;
  EXPECT_NE(error_of(replace(shipped(), "attention_bwd_efficiency: 0.565", "attention_bwd_efficiency: 0")), "");
  const std::string dropped = replace(shipped(), "attention_bwd_efficiency: 0.565", "");
  EXPECT_DOUBLE_EQ(parse_topology(dropped, "t.yaml", {}).gpu.flash_bwd_efficiency(), 0.62);
}

// gpu.sustained_share is an optional fraction (absent: 1) that scales every
// GEMM's and flash kernel's time by its inverse and no memory-bound work's.
TEST(TopologyErrors, SustainedShare) {
  const Topology t = parse_topology(shipped(), "t.yaml", {});
  ASSERT_TRUE(t.gpu.sustained_share.has_value());
  const Topology idle = parse_topology(replace(shipped(), "sustained_share: 0.82", ""), "t.yaml", {});
  EXPECT_DOUBLE_EQ(idle.gpu.sustained(), 1.0);
  const sim::GemmShape g{.m = 8192, .n = 8192, .k = 8192, .dtype = model::DType::bf16};
  EXPECT_NEAR(gemm_body_us(t, g, t.gpu.sms) / gemm_body_us(idle, g, idle.gpu.sms), 1.0 / *t.gpu.sustained_share, 1e-9);
  EXPECT_DOUBLE_EQ(elementwise_body_us(t, 1e9, 0.0), elementwise_body_us(idle, 1e9, 0.0));
  const std::string high = error_of(replace(shipped(), "sustained_share: 0.82", "sustained_share: 1.2"));
  EXPECT_NE(high.find("t.yaml:17:"), std::string::npos) << high;
  EXPECT_NE(high.find("gpu.sustained_share"), std::string::npos) << high;
  EXPECT_NE(error_of(replace(shipped(), "sustained_share: 0.82", "sustained_share: 0")), "");
}

// A cpu topology states MPI's constants under mpi: and its ranks under
// node.gpus; a GPU topology states NCCL's under nccl:. Each refuses the
// other's section and keys, naming where they belong; mpi: keys are
// checked like any other (file:line, the key, the rule).
std::string cpu_local() { return model::read_file(model::resolve_topology("cpu-local")); }

TEST(TopologyErrors, CpuTopologiesStateMpisConstantsUnderMpi) {
  EXPECT_EQ(error_of(cpu_local()), "");
  const Topology t = parse_topology(cpu_local(), "t.yaml");
  EXPECT_EQ(t.nccl.channels, 1);
  EXPECT_DOUBLE_EQ(t.network.nic_GBps(), t.node.nccl_link_GBps);  // across hosts: the link's, where not stated
  const Topology across = parse_topology(replace(cpu_local(), "\nmpi:", "\nmpi:\n  network_link_GBps: 1.5"), "t.yaml");
  EXPECT_DOUBLE_EQ(across.network.nic_GBps(), 1.5);

  const std::string with_nccl = error_of(cpu_local() + "nccl:\n  channels: 1\n");
  EXPECT_NE(with_nccl.find("t.yaml:"), std::string::npos) << with_nccl;
  EXPECT_NE(with_nccl.find("under mpi:"), std::string::npos) << with_nccl;
  const std::string node_key = error_of(replace(cpu_local(), "\nmpi:", "\n  nvls: false\nmpi:"));
  EXPECT_NE(node_key.find("unknown key 'nvls'"), std::string::npos) << node_key;
  const std::string no_mpi = error_of(replace(cpu_local(), "\nmpi:", "\nmpj:"));
  EXPECT_NE(no_mpi.find("unknown key 'mpj'"), std::string::npos) << no_mpi;
  const std::string bad_link = error_of(replace(cpu_local(), "\n  link_GBps:", "\n  link_GBps: 0 #"));
  EXPECT_NE(bad_link.find("mpi.link_GBps"), std::string::npos) << bad_link;
  EXPECT_NE(bad_link.find("positive"), std::string::npos) << bad_link;
  const std::string unknown = error_of(replace(cpu_local(), "\nmpi:", "\nmpi:\n  channels: 4"));
  EXPECT_NE(unknown.find("unknown key 'channels'"), std::string::npos) << unknown;

  const std::string gpu_mpi = error_of(shipped() + "mpi:\n  base_latency_us: 1\n");
  EXPECT_NE(gpu_mpi.find("needs `device: cpu`"), std::string::npos) << gpu_mpi;
  const std::string gpu_per_op = error_of(replace(shipped(), "\nnccl:\n", "\nnccl:\n  per_op: {ranks: 2}\n"));
  EXPECT_NE(gpu_per_op.find("as mpi.per_op"), std::string::npos) << gpu_per_op;
  EXPECT_NE(gpu_per_op.find("t.yaml:"), std::string::npos) << gpu_per_op;
}

}  // namespace
}  // namespace coconet::sim
