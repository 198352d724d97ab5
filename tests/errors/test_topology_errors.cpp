// Topologies that must be rejected: unknown keys, missing keys, impossible
// values, bad overrides. Each error names the place (file:line, or the
// override) and the rule.
#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/error.h"
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
  EXPECT_NE(error_of(replace(shipped(), "nccl_link_GBps: 20.6", "nccl_link_GBps: 30")).find("exceeds the line rate"),
            std::string::npos);
  EXPECT_NE(error_of(replace(shipped(), "nvls_efficiency: 0.85", "nvls_efficiency: 0")).find("nvls_efficiency"),
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

}  // namespace
}  // namespace coconet::sim
