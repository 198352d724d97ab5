// NCCL's software constants, one table per NCCL version
// (configs/nccl/<version>.yaml): the latencies, per-channel bandwidths and
// protocol efficiencies NCCL's tuning model (src/graph/tuning.cc) prices a
// collective with, the same on every machine of a GPU generation. A topology
// names the table by version and keeps only its hardware
// (`nccl: {version: "2.28", gpu_arch: hopper, host_cpu: intel, channels: ...}`);
// parse_topology (sim/topology.h) reads the table's values as if the topology
// stated them, at the keys it always had (node.hop_latency_us,
// nccl.base_latency_us, ...), so every formula reads them where it did. A key
// the topology states itself (or a --set) takes its place.
//
// Rows that NCCL indexes by hardware: by the GPU generation (`gpu_arch`:
// NCCL's compCapIndex) the NVLink bandwidth it assumes per link (topo.h
// SMxx_NVLINK_BW), one channel's LL128 ceiling (perChMaxRingLL128Bws, the
// one-node column: the model keeps one), the one-node LL ceiling (llMaxBws
// column 0) and the NVLS efficiency (nvlsEfficiency); by the host CPU
// (`host_cpu`) the LL ceiling across nodes: NCCL takes llMaxBws row 1 for an
// AMD or mixed host and row 0 for any other (tuning.cc, index1).
//
// Each table is read once per process (nccl_table); its errors name
// file:line; an unknown version names the known ones.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/topology.h"

namespace YAML {
class Node;
}

namespace coconet::sim {

struct NcclArchRow {
  double nvlink_GBps = 0;      // node.nccl_link_GBps
  double channel_GBps = 0;     // nccl.channel_GBps
  double ll_max_GBps = 0;      // nccl.ll_max_GBps.one_node
  double nvls_efficiency = 0;  // node.nvls_efficiency (0: NVLS unsupported)
};

struct NcclCpuRow {
  double two_nodes_GBps = 0;   // nccl.ll_max_GBps.two_nodes
  double multi_node_GBps = 0;  // nccl.ll_max_GBps.multi_node
};

struct NcclTable {
  std::string version;
  std::string origin;  // the file it was read from
  std::string source;  // the NCCL release and commit its values are read from
  ProtoTable ring_base_us, tree_base_us, nvls_base_us;
  ProtoTable nvlink_ring_hop_us, nvlink_tree_hop_us, net_ring_hop_us, net_tree_hop_us;
  double ll_efficiency = 0, ll128_efficiency = 0, tree_efficiency = 0, tree_ll_efficiency = 0;
  double tree_ll128_one_node_efficiency = 0, tree_ll128_multi_node_efficiency = 0;
  std::map<std::string, NcclArchRow> archs;  // by gpu_arch
  std::map<std::string, NcclCpuRow> cpus;    // "amd" (AMD or mixed hosts) and "other"
  // The document itself: what parse_topology reads in place of the keys a
  // topology leaves to the table (its values' text, so they read back exactly).
  std::shared_ptr<const YAML::Node> yaml;
};

// The host CPUs a topology may name (nccl.host_cpu) and the row of the
// table's across-node LL ceilings each takes (NCCL 2.28 tuning.cc: index1 =
// 1 for cpuVendor AMD or MIXED, else 0).
[[nodiscard]] const std::vector<std::string>& nccl_host_cpus();
[[nodiscard]] std::string nccl_cpu_row(const std::string& host_cpu);

// Parses and checks a table; `origin` names it in messages (file:line).
[[nodiscard]] NcclTable parse_nccl_table(const std::string& yaml_text, const std::string& origin);
// The versions configs/nccl/ holds (file names without .yaml), sorted.
[[nodiscard]] std::vector<std::string> nccl_versions();
// The table of `version` (configs/nccl/<version>.yaml under model::data_root()),
// read and checked on first use, then kept. Throws UserError naming the known
// versions when there is none.
[[nodiscard]] const NcclTable& nccl_table(const std::string& version);

}  // namespace coconet::sim
