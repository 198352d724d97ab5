// Loading and checking topologies. Every key is required (a topology states
// each constant, with its source in a comment), unknown keys are rejected, and
// each value is checked against what is physically possible. `--set` overrides
// replace values in the YAML tree before the checks, so they meet the same rules
// and their errors name the override.
#include "sim/topology.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>
#include <type_traits>

#include <fmt/core.h>

#include "model/set_flag.h"
#include "model/catalog.h"
#include "model/error.h"
#include "model/expr.h"
#include "model/yaml_util.h"
#include "sim/collective.h"
#include "sim/nccl_table.h"
#include "sim/units.h"

namespace coconet::sim {

double ProtoTable::at(model::Proto p) const {
  switch (p) {
    case model::Proto::ll: return ll;
    case model::Proto::ll128: return ll128;
    case model::Proto::simple: return simple;
    case model::Proto::auto_: break;
  }
  throw InternalError("ProtoTable::at needs a concrete protocol");
}

double GpuSpec::gemm_tflops(model::DType t) const {
  switch (t) {
    case model::DType::f16: return tflops_f16;
    case model::DType::bf16: return tflops_bf16;
    case model::DType::f32: break;
  }
  return tflops_f32_gemm.value_or(tflops_f32);
}

double GpuSpec::gemm_operand_GBps(model::DType t) const {
  switch (t) {
    case model::DType::f16: return gemm_operand_GBps_f16;
    case model::DType::bf16: return gemm_operand_GBps_bf16;
    case model::DType::f32: return gemm_operand_GBps_f32;
  }
  return 0.0;
}

double NodeSpec::nvlink_GBps() const {
  return nvlink_links * std::min(nccl_link_GBps, nvlink_link_GBps);
}

RankScales RankScales::slowest(const RankScales& o) const {
  return {std::min(compute, o.compute), std::min(hbm, o.hbm), std::min(nvlink, o.nvlink),
          std::min(network, o.network)};
}

RankScales Topology::scales_of(int rank) const {
  RankScales s;
  const int n = node_of(rank);
  for (const NodeOverride& o : asymmetry.nodes)
    if (o.node == n) s = s.times(o.scales);
  for (const Straggler& g : asymmetry.stragglers)
    if (g.rank == rank) s = s.times(g.scales);
  return s;
}

Topology Topology::scaled(const RankScales& s) const {
  if (s == RankScales{}) return *this;
  Topology t = *this;
  t.gpu.tflops_f16 *= s.compute;
  t.gpu.tflops_bf16 *= s.compute;
  t.gpu.tflops_f32 *= s.compute;
  if (t.gpu.tflops_fp8) *t.gpu.tflops_fp8 *= s.compute;
  if (t.gpu.tflops_f32_gemm) *t.gpu.tflops_f32_gemm *= s.compute;
  t.gpu.gemm_operand_GBps_f16 *= s.compute;  // the widening and packing run on the rank's own core
  t.gpu.gemm_operand_GBps_bf16 *= s.compute;
  t.gpu.gemm_operand_GBps_f32 *= s.compute;
  t.gpu.hbm_GBps *= s.hbm;
  if (t.gpu.copy_GBps) *t.gpu.copy_GBps *= s.hbm;
  t.nccl.reduce_GBps *= s.hbm;  // combining received data runs at memory speed
  t.node.nvlink_link_GBps *= s.nvlink;
  t.node.nccl_link_GBps *= s.nvlink;
  t.network.nic_Gbps *= s.network;
  // A channel moves its data over the links it drives: its ceilings scale with the slower of them.
  const double link = std::min(s.nvlink, s.network);
  t.nccl.channel_GBps *= link;
  t.nccl.ll_max_one_node_GBps *= link;
  t.nccl.ll_max_two_nodes_GBps *= link;
  t.nccl.ll_max_multi_node_GBps *= link;
  t.nccl.latency_correction_us = latency_correction_us(t);  // priced on the scaled rates, as every collective is
  return t;
}

double NetworkSpec::nic_GBps() const { return nic_Gbps / kBitsPerByte * nic_efficiency; }

namespace {

// Reads one topology document: typed getters that check ranges and name the
// place (file:line, or the --set override that put the value there).
// What a topology takes from its NCCL table (sim/nccl_table.h): the keys
// it leaves to the table, by dotted path, and where it names the table.
struct FromTable {
  std::set<std::string> keys;
  YAML::Node version;  // the topology's nccl.version
  std::string name;    // "NCCL 2.28 (configs/nccl/2.28.yaml)"
};

// The key of `keys` that `path` is (or lies under), else "".
std::string key_of(const std::set<std::string>& keys, const std::string& path) {
  for (const std::string& k : keys)
    if (path == k || path.rfind(k + ".", 0) == 0 || path.rfind(k + "[", 0) == 0) return k;
  return "";
}

class Reader {
 public:
  Reader(model::YamlContext ctx, std::set<std::string> overridden, FromTable from_table = {})
      : ctx_(std::move(ctx)), overridden_(std::move(overridden)), from_table_(std::move(from_table)) {}

  // A value from the table is placed at the topology's nccl.version, the
  // line that brought it in.
  [[noreturn]] void fail(const YAML::Node& n, const std::string& path, const std::string& what) const {
    if (const std::string key = overridden_by(path); !key.empty())
      throw UserError(fmt::format("{}: --set {}: {}: {}", ctx_.origin, key, path, what));
    if (!key_of(from_table_.keys, path).empty())
      ctx_.fail(from_table_.version, fmt::format("{} ({}'s value for this topology): {}", path, from_table_.name, what));
    ctx_.fail(n, fmt::format("{}: {}", path, what));
  }

  // The --set key that put `path` there (the key itself, or a list it is in), else "".
  [[nodiscard]] std::string overridden_by(const std::string& path) const { return key_of(overridden_, path); }

  YAML::Node section(const YAML::Node& parent, const std::string& path, const char* key,
                     std::initializer_list<const char*> keys) const {
    const YAML::Node n = parent[key];
    const std::string full = join(path, key);
    if (!n) ctx_.fail(parent, fmt::format("{} needs the key '{}'", path.empty() ? "topology" : path, key));
    ctx_.require_map(n, full);
    ctx_.allow_keys(n, keys, full);
    return n;
  }

  template <typename T>
  T value(const YAML::Node& parent, const std::string& path, const char* key) const {
    const YAML::Node n = parent[key];
    const std::string full = join(path, key);
    if (!n) ctx_.fail(parent, fmt::format("{} needs the key '{}'", path.empty() ? "topology" : path, key));
    if (!n.IsScalar()) fail(n, full, "must be a single value");
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      fail(n, full, fmt::format("'{}' is not a valid {}", n.Scalar(), model::YamlContext::type_name<T>()));
    }
  }

  // Read as 64 bits, then held to [1, max] (model/limits.h states the maxima).
  int positive_int(const YAML::Node& parent, const std::string& path, const char* key,
                   std::int64_t max = std::numeric_limits<int>::max()) const {
    const std::int64_t v = value<std::int64_t>(parent, path, key);
    if (v < 1) fail(parent[key], join(path, key), fmt::format("must be at least 1, got {}", v));
    if (v > max) fail(parent[key], join(path, key), fmt::format("{} is more than the limit of {}", v, max));
    return static_cast<int>(v);
  }

  double positive(const YAML::Node& parent, const std::string& path, const char* key) const {
    const double v = value<double>(parent, path, key);
    // A subnormal (below 2.2e-308) is zero for every rate it divides: refused like zero.
    if (!(v > 0) || !std::isnormal(v))
      fail(parent[key], join(path, key), fmt::format("must be a positive number, got {}", v));
    return v;
  }

  double non_negative(const YAML::Node& parent, const std::string& path, const char* key) const {
    const double v = value<double>(parent, path, key);
    if (!(v >= 0) || !std::isfinite(v))
      fail(parent[key], join(path, key), fmt::format("must be zero or more, got {}", v));
    return v;
  }

  // A fraction of a peak: in (0, 1] (or [0, 1] when zero means "not there").
  double fraction(const YAML::Node& parent, const std::string& path, const char* key,
                  bool zero_ok = false) const {
    const double v = value<double>(parent, path, key);
    if (!(v <= 1.0) || v < 0 || (!zero_ok && v == 0))
      fail(parent[key], join(path, key),
           fmt::format("is an efficiency and must lie in {}0, 1], got {}", zero_ok ? "[" : "(", v));
    return v;
  }

  // An optional table: `fallback` when the key is absent.
  ProtoTable protos_or(const YAML::Node& parent, const std::string& path, const char* key,
                       const ProtoTable& fallback) const {
    return parent[key] ? protos(parent, path, key) : fallback;
  }
  double fraction_or(const YAML::Node& parent, const std::string& path, const char* key, double fallback) const {
    return parent[key] ? fraction(parent, path, key) : fallback;
  }

  ProtoTable protos(const YAML::Node& parent, const std::string& path, const char* key) const {
    const YAML::Node n = section(parent, path, key, {"ll", "ll128", "simple"});
    const std::string p = join(path, key);
    return {non_negative(n, p, "ll"), non_negative(n, p, "ll128"), non_negative(n, p, "simple")};
  }

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }

 private:
  model::YamlContext ctx_;
  std::set<std::string> overridden_;
  FromTable from_table_;
};

GpuSpec read_gpu(const Reader& r, const YAML::Node& root) {
  const YAML::Node n = r.section(root, "", "gpu",
                                 {"model", "sms", "hbm_GBps", "hbm_efficiency", "tflops",
                                  "gemm_efficiency", "gemm_tile", "launch_us", "memory_GB", "reserved_GB", "gemm_operand_GBps",
                                  "copy", "op_flops", "attention_efficiency", "attention_bwd_efficiency",
                                  "sustained_share"});
  GpuSpec g;
  g.model = r.value<std::string>(n, "gpu", "model");
  g.sms = r.positive_int(n, "gpu", "sms");
  g.hbm_GBps = r.positive(n, "gpu", "hbm_GBps");
  g.hbm_efficiency = r.fraction(n, "gpu", "hbm_efficiency");
  const YAML::Node tf = r.section(n, "gpu", "tflops", {"f16", "bf16", "f32", "f32_gemm", "fp8"});
  g.tflops_f16 = r.positive(tf, "gpu.tflops", "f16");
  g.tflops_bf16 = r.positive(tf, "gpu.tflops", "bf16");
  g.tflops_f32 = r.positive(tf, "gpu.tflops", "f32");
  if (tf["f32_gemm"]) g.tflops_f32_gemm = r.positive(tf, "gpu.tflops", "f32_gemm");
  if (tf["fp8"]) g.tflops_fp8 = r.positive(tf, "gpu.tflops", "fp8");  // optional: `coconet step`'s FP8 GEMMs
  g.gemm_efficiency = r.fraction(n, "gpu", "gemm_efficiency");
  if (n["attention_efficiency"]) g.attention_efficiency = r.fraction(n, "gpu", "attention_efficiency");
  if (n["attention_bwd_efficiency"]) g.attention_bwd_efficiency = r.fraction(n, "gpu", "attention_bwd_efficiency");
  if (n["sustained_share"]) g.sustained_share = r.fraction(n, "gpu", "sustained_share");
  const YAML::Node tile = r.section(n, "gpu", "gemm_tile", {"m", "n"});
  g.gemm_tile_m = r.positive_int(tile, "gpu.gemm_tile", "m");
  g.gemm_tile_n = r.positive_int(tile, "gpu.gemm_tile", "n");
  g.launch_us = r.non_negative(n, "gpu", "launch_us");
  g.memory_GB = n["memory_GB"] ? r.positive(n, "gpu", "memory_GB") : 0.0;  // optional: only `coconet step` reads it
  if (n["reserved_GB"]) g.reserved_GB = r.non_negative(n, "gpu", "reserved_GB");  // optional: `coconet step`'s
  if (n["gemm_operand_GBps"]) {  // optional: the cpu backend's GEMM (checked against `device` by the caller)
    const YAML::Node o = r.section(n, "gpu", "gemm_operand_GBps", {"f16", "bf16", "f32"});
    if (o["f16"]) g.gemm_operand_GBps_f16 = r.positive(o, "gpu.gemm_operand_GBps", "f16");
    if (o["bf16"]) g.gemm_operand_GBps_bf16 = r.positive(o, "gpu.gemm_operand_GBps", "bf16");
    if (o["f32"]) g.gemm_operand_GBps_f32 = r.positive(o, "gpu.gemm_operand_GBps", "f32");
  }
  if (n["op_flops"]) {  // optional: costly operations' weights
    const YAML::Node w = r.section(n, "gpu", "op_flops", {"sqrt", "rsqrt", "exp", "log", "tanh", "pow", "dropout", "norm"});
    for (int k = 0; k < model::kCostlyOps; ++k) {
      const std::string key = model::to_string(model::CostlyOp(k));
      if (w[key]) g.op_flops_set[std::size_t(k)] = r.non_negative(w, "gpu.op_flops", key.c_str());
    }
  }
  if (n["copy"]) {  // optional: a device-local copy's own constants
    const YAML::Node c = r.section(n, "gpu", "copy", {"us", "GBps"});
    if (c["us"]) g.copy_us = r.non_negative(c, "gpu.copy", "us");
    if (c["GBps"]) g.copy_GBps = r.positive(c, "gpu.copy", "GBps");
  }
  return g;
}

NodeSpec read_node(const Reader& r, const YAML::Node& root) {
  const YAML::Node n = r.section(root, "", "node",
                                 {"gpus", "nvlink_links", "nvlink_link_GBps", "nccl_link_GBps", "nvls",
                                  "nvls_efficiency", "hop_latency_us", "tree_hop_latency_us"});
  NodeSpec s;
  s.gpus = r.positive_int(n, "node", "gpus", model::kMaxGpusPerNode);
  s.nvlink_links = r.positive_int(n, "node", "nvlink_links");
  s.nvlink_link_GBps = r.positive(n, "node", "nvlink_link_GBps");
  s.nccl_link_GBps = r.positive(n, "node", "nccl_link_GBps");
  if (s.nccl_link_GBps > s.nvlink_link_GBps)
    r.fail(n["nccl_link_GBps"], "node.nccl_link_GBps",
           fmt::format("{} GB/s achievable exceeds the line rate node.nvlink_link_GBps = {}",
                       s.nccl_link_GBps, s.nvlink_link_GBps));
  s.nvls = r.value<bool>(n, "node", "nvls");
  s.nvls_efficiency = r.fraction(n, "node", "nvls_efficiency", /*zero_ok=*/!s.nvls);
  s.hop_latency_us = r.protos(n, "node", "hop_latency_us");
  s.tree_hop_latency_us = r.protos_or(n, "node", "tree_hop_latency_us", s.hop_latency_us);
  return s;
}

// `network.pod_gpus` and `network.oversubscription`, optional and given
// together: pods of whole nodes, and the factor their uplinks fall short by.
void read_pods(const Reader& r, const YAML::Node& n, int node_gpus, NetworkSpec& s) {
  const bool pod = bool(n["pod_gpus"]);
  const bool over = bool(n["oversubscription"]);
  if (!pod && !over) return;
  if (!pod || !over)
    r.fail(n[pod ? "pod_gpus" : "oversubscription"], pod ? "network.pod_gpus" : "network.oversubscription",
           "network.pod_gpus and network.oversubscription go together: give both (a pod's size and how much "
           "less bandwidth its uplinks carry than its NICs inject, e.g. 7 for 1:7) or neither");
  s.pod_gpus = r.positive_int(n, "network", "pod_gpus", model::kMaxGpus);
  if (s.pod_gpus < node_gpus || s.pod_gpus % node_gpus != 0)
    r.fail(n["pod_gpus"], "network.pod_gpus",
           fmt::format("{} GPUs is not a whole number of nodes of node.gpus = {}: a pod holds whole nodes "
                       "(at least one)", s.pod_gpus, node_gpus));
  s.oversubscription = r.positive(n, "network", "oversubscription");
  if (s.oversubscription < 1)
    r.fail(n["oversubscription"], "network.oversubscription",
           fmt::format("{} is below 1: write k for a 1:k oversubscribed network above the pods (1: full "
                       "bisection)", s.oversubscription));
}

NetworkSpec read_network(const Reader& r, const YAML::Node& root, int node_gpus) {
  const YAML::Node n = r.section(root, "", "network",
                                 {"nics", "nic_Gbps", "nic_efficiency", "hop_latency_us", "tree_hop_latency_us",
                                  "pod_gpus", "oversubscription"});
  NetworkSpec s;
  s.nics = r.positive_int(n, "network", "nics");
  s.nic_Gbps = r.positive(n, "network", "nic_Gbps");
  s.nic_efficiency = r.fraction(n, "network", "nic_efficiency");
  s.hop_latency_us = r.protos(n, "network", "hop_latency_us");
  s.tree_hop_latency_us = r.protos_or(n, "network", "tree_hop_latency_us", s.hop_latency_us);
  read_pods(r, n, node_gpus, s);
  return s;
}

// `nccl.measured_latency`: one published small-message time on one node, named
// by its collective, the algorithm and protocol it ran, its ranks and bytes.
NcclSpec::MeasuredLatency read_measured_latency(const Reader& r, const YAML::Node& nccl) {
  const std::string path = "nccl.measured_latency";
  const YAML::Node n =
      r.section(nccl, "nccl", "measured_latency", {"op", "algo", "proto", "ranks", "bytes", "time_us"});
  NcclSpec::MeasuredLatency m;
  const std::string op = r.value<std::string>(n, path, "op");
  const auto ops = {model::OpKind::allreduce, model::OpKind::reducescatter, model::OpKind::allgather,
                    model::OpKind::broadcast, model::OpKind::reduce, model::OpKind::send};
  const auto it = std::find_if(ops.begin(), ops.end(), [&](model::OpKind k) { return model::to_string(k) == op; });
  if (it == ops.end())
    r.fail(n["op"], path + ".op", fmt::format("'{}' is not a collective: write allreduce, reducescatter, "
                                              "allgather, broadcast, reduce or send", op));
  m.op = *it;
  try {
    m.algo = model::parse_algo(r.value<std::string>(n, path, "algo"));
    m.proto = model::parse_proto(r.value<std::string>(n, path, "proto"));
  } catch (const UserError& e) {
    r.fail(n, path, fmt::format("{}: name the algorithm and protocol the measurement ran", e.what()));
  }
  if (m.algo == model::Algo::auto_ || m.proto == model::Proto::auto_)
    r.fail(n, path, "algo and proto must be the ones the measurement ran, not auto");
  const bool allreduce = m.op == model::OpKind::allreduce;
  if (m.algo == model::Algo::hierarchical || (m.algo != model::Algo::ring && !allreduce) ||
      (m.algo == model::Algo::nvls && m.proto != model::Proto::simple))
    r.fail(n, path, fmt::format("NCCL does not run {} {} with {} on one node: name ring (any collective), tree "
                                "(allreduce) or nvls (allreduce, simple)", op, model::to_string(m.algo),
                                model::to_string(m.proto)));
  m.ranks = r.positive_int(n, path, "ranks", model::kMaxGpusPerNode);
  if (m.ranks < 2 && m.op != model::OpKind::send)
    r.fail(n["ranks"], path + ".ranks", fmt::format("a {} needs at least 2 ranks", op));
  m.bytes = r.non_negative(n, path, "bytes");
  m.time_us = r.positive(n, path, "time_us");
  return m;
}

// The ops `nccl.per_op` may name: the ones calibrate measures.
constexpr model::OpKind kPerOpKinds[] = {model::OpKind::allreduce, model::OpKind::reducescatter,
                                         model::OpKind::allgather, model::OpKind::send};

OpConstants read_op_constants(const Reader& r, const YAML::Node& parent, const std::string& path, const char* key) {
  const YAML::Node n = r.section(parent, path, key, {"base_latency_us", "link_GBps"});
  const std::string p = Reader::join(path, key);
  return {r.non_negative(n, p, "base_latency_us"), r.positive(n, p, "link_GBps")};
}

PerOp read_per_op(const Reader& r, const YAML::Node& mpi) {
  const YAML::Node n = r.section(mpi, "mpi", "per_op", {"ranks", "allreduce", "reducescatter", "allgather", "send"});
  PerOp p;
  p.ranks = r.positive_int(n, "mpi.per_op", "ranks", model::kMaxGpus);
  for (model::OpKind op : kPerOpKinds) {
    const std::string name = model::to_string(op);
    if (!n[name]) continue;
    const std::string path = "mpi.per_op." + name;
    const YAML::Node o = r.section(n, "mpi.per_op", name.c_str(), {"small", "large", "progress_share"});
    OpRegimes g;
    if (o["progress_share"]) g.sms_per_channel = r.positive(o, path, "progress_share");
    if (o["small"]) g.small = read_op_constants(r, o, path, "small");
    if (o["large"]) g.large = read_op_constants(r, o, path, "large");
    if (o["large"] && !mpi["large_messages"])
      r.fail(o["large"], path + ".large", "a large-message regime needs mpi.large_messages (its from_bytes); add it or remove this key");
    p.ops.emplace_back(op, g);
  }
  return p;
}

NcclSpec read_nccl(const Reader& r, const YAML::Node& root) {
  const YAML::Node n = r.section(root, "", "nccl",
                                 {"version", "gpu_arch", "host_cpu", "channels", "channel_GBps", "ll_max_GBps", "ll_efficiency",
                                  "ll128_efficiency", "tree_efficiency", "tree_ll_efficiency",
                                  "tree_ll128_efficiency", "base_latency_us",
                                  "hbm_bytes_per_link_byte", "reduce_GBps", "sms_per_channel",
                                  "measured_latency", "interference", "alltoall_efficiency"});
  NcclSpec s;
  if (n["version"]) {  // checked by merge_nccl_table
    s.version = n["version"].as<std::string>();
    s.gpu_arch = n["gpu_arch"].as<std::string>();
    s.host_cpu = n["host_cpu"].as<std::string>();
  }
  s.channels = r.positive_int(n, "nccl", "channels", model::kMaxChannels);
  s.channel_GBps = r.positive(n, "nccl", "channel_GBps");
  const YAML::Node ll = r.section(n, "nccl", "ll_max_GBps", {"one_node", "two_nodes", "multi_node"});
  s.ll_max_one_node_GBps = r.positive(ll, "nccl.ll_max_GBps", "one_node");
  s.ll_max_multi_node_GBps = r.positive(ll, "nccl.ll_max_GBps", "multi_node");
  s.ll_max_two_nodes_GBps =
      ll["two_nodes"] ? r.positive(ll, "nccl.ll_max_GBps", "two_nodes") : s.ll_max_multi_node_GBps;
  s.ll_efficiency = r.fraction(n, "nccl", "ll_efficiency");
  s.ll128_efficiency = r.fraction(n, "nccl", "ll128_efficiency");
  s.tree_efficiency = r.fraction(n, "nccl", "tree_efficiency");
  s.tree_ll_efficiency = r.fraction_or(n, "nccl", "tree_ll_efficiency", s.ll_efficiency);
  s.tree_ll128_one_node_efficiency = s.tree_ll128_multi_node_efficiency = s.ll128_efficiency;
  if (n["tree_ll128_efficiency"]) {
    const YAML::Node t = r.section(n, "nccl", "tree_ll128_efficiency", {"one_node", "multi_node"});
    s.tree_ll128_one_node_efficiency = r.fraction(t, "nccl.tree_ll128_efficiency", "one_node");
    s.tree_ll128_multi_node_efficiency = r.fraction(t, "nccl.tree_ll128_efficiency", "multi_node");
  }
  const YAML::Node base = r.section(n, "nccl", "base_latency_us", {"ring", "tree", "nvls"});
  s.ring_base_us = r.protos(base, "nccl.base_latency_us", "ring");
  s.tree_base_us = r.protos(base, "nccl.base_latency_us", "tree");
  s.nvls_base_us = r.protos(base, "nccl.base_latency_us", "nvls");
  s.hbm_bytes_per_link_byte = r.non_negative(n, "nccl", "hbm_bytes_per_link_byte");
  s.reduce_GBps = r.positive(n, "nccl", "reduce_GBps");
  s.sms_per_channel = r.positive(n, "nccl", "sms_per_channel");
  if (n["measured_latency"]) s.measured_latency = read_measured_latency(r, n);
  s.interference = n["interference"] ? r.non_negative(n, "nccl", "interference") : 0.0;
  if (n["alltoall_efficiency"]) {
    const YAML::Node a = r.section(n, "nccl", "alltoall_efficiency", {"nvlink", "network"});
    s.alltoall_efficiency.nvlink = r.fraction_or(a, "nccl.alltoall_efficiency", "nvlink", 1.0);
    s.alltoall_efficiency.network = r.fraction_or(a, "nccl.alltoall_efficiency", "network", 1.0);
  }
  return s;
}

// Every protocol alike: MPI has one transport.
ProtoTable one_protocol(double v) { return {v, v, v}; }

// MPI's transport has no LL protocol, so no LL ceiling: far above any link.
constexpr double kNoLlCeilingGBps = 1e6;

// A cpu topology's `mpi:` section (device: cpu): MPI's collectives as
// `coconet calibrate` fits them, between the ranks of one host (link) and
// across hosts (network), with the overlap and step constants of the cpu
// backend's threads. Read into the node, network and nccl fields the
// simulator prices collectives from, with the values that make those
// formulas MPI's (sim/collective_mpi.h): one channel, one protocol and every
// algorithm alike, no LL ceiling, no NVLS, one NIC, no HBM traffic of its own
// (the fitted rates are achieved ones).
void read_mpi(const Reader& r, const YAML::Node& root, Topology& t) {
  const YAML::Node n = r.section(root, "", "mpi",
                                 {"base_latency_us", "hop_latency_us", "link_GBps", "network_link_GBps",
                                  "network_hop_latency_us", "reduce_GBps", "progress_share", "interference",
                                  "step_sync_us", "handoff_us", "large_messages", "per_op"});
  const double base = r.non_negative(n, "mpi", "base_latency_us");
  const double hop = r.non_negative(n, "mpi", "hop_latency_us");
  const double link = r.positive(n, "mpi", "link_GBps");
  const double network_link = n["network_link_GBps"] ? r.positive(n, "mpi", "network_link_GBps") : link;
  const double network_hop = n["network_hop_latency_us"] ? r.non_negative(n, "mpi", "network_hop_latency_us") : hop;
  NodeSpec& node = t.node;
  node.nvlink_links = 1;
  node.nvlink_link_GBps = node.nccl_link_GBps = link;
  node.hop_latency_us = node.tree_hop_latency_us = one_protocol(hop);
  NetworkSpec& net = t.network;
  net.nics = 1;
  net.nic_Gbps = network_link * kBitsPerByte;
  net.nic_efficiency = 1;
  net.hop_latency_us = net.tree_hop_latency_us = one_protocol(network_hop);
  NcclSpec& s = t.nccl;
  s.channels = 1;
  s.channel_GBps = link;
  s.ll_max_one_node_GBps = s.ll_max_two_nodes_GBps = s.ll_max_multi_node_GBps = kNoLlCeilingGBps;
  s.ll_efficiency = s.ll128_efficiency = s.tree_efficiency = 1;
  s.tree_ll_efficiency = s.tree_ll128_one_node_efficiency = s.tree_ll128_multi_node_efficiency = 1;
  s.ring_base_us = s.tree_base_us = s.nvls_base_us = one_protocol(base);
  s.reduce_GBps = r.positive(n, "mpi", "reduce_GBps");
  s.sms_per_channel = r.positive(n, "mpi", "progress_share");
  if (n["large_messages"]) {
    const char* p = "mpi.large_messages";
    const YAML::Node l = r.section(n, "mpi", "large_messages",
                                   {"from_bytes", "base_latency_us", "hop_latency_us", "link_GBps", "reduce_GBps"});
    s.large_messages = LargeMessages{r.positive(l, p, "from_bytes"), r.non_negative(l, p, "base_latency_us"),
                                     r.non_negative(l, p, "hop_latency_us"), r.positive(l, p, "link_GBps"),
                                     r.positive(l, p, "reduce_GBps")};
  }
  if (n["per_op"]) s.per_op = read_per_op(r, n);
  s.interference = n["interference"] ? r.non_negative(n, "mpi", "interference") : 0.0;
  s.handoff_us = n["handoff_us"] ? r.non_negative(n, "mpi", "handoff_us") : 0.0;
  s.step_sync_us = n["step_sync_us"] ? r.non_negative(n, "mpi", "step_sync_us") : 0.0;
}

// A cpu topology's `node:` (device: cpu): the ranks on one host.
void read_cpu_node(const Reader& r, const YAML::Node& root, Topology& t) {
  const YAML::Node n = r.section(root, "", "node", {"gpus"});
  t.node.gpus = r.positive_int(n, "node", "gpus", model::kMaxGpusPerNode);
}

// The optional asymmetry keys (absent: every rank alike).
constexpr const char* kScaleKeys[] = {"compute_scale", "hbm_scale", "nvlink_scale", "network_scale"};
// A scale above this is a typo rather than a faster GPU (a mixed cluster's fastest part is
// described as the topology, the slower ones as overrides); it keeps a rate from overflowing.
constexpr double kMaxScale = 1e3;
// A scale below this is a typo rather than a slow rank: a part 1000x slower than the
// topology it is described in is not the same machine, and smaller scales push its
// times past any step (1e-300 priced 1.2e304 us; a subnormal stalled the simulation).
constexpr double kMinScale = 1.0 / kMaxScale;
// Entries of node_overrides and of stragglers: the simulator keeps each distinct
// rank's model (about 40 KB and 0.65 ms of simulation each, issue 34), so 1024 cost
// under 50 MB and 1 s; a cluster with more distinct parts is a topology of its own.
constexpr std::size_t kMaxAsymmetryEntries = 1024;

RankScales read_scales(const Reader& r, const YAML::Node& n, const std::string& path) {
  RankScales s;
  double* slot[] = {&s.compute, &s.hbm, &s.nvlink, &s.network};
  bool any = false;
  for (std::size_t i = 0; i < std::size(kScaleKeys); ++i) {
    if (!n[kScaleKeys[i]]) continue;
    any = true;
    *slot[i] = r.positive(n, path, kScaleKeys[i]);
    if (*slot[i] > kMaxScale)
      r.fail(n[kScaleKeys[i]], path + "." + kScaleKeys[i],
             fmt::format("{} is more than the limit of {}", *slot[i], kMaxScale));
    if (*slot[i] < kMinScale)
      r.fail(n[kScaleKeys[i]], path + "." + kScaleKeys[i],
             fmt::format("{} is less than the limit of {} (a part 1000x slower)", *slot[i], kMinScale));
  }
  if (!any)
    r.fail(n, path, "states no scale: give at least one of compute_scale, hbm_scale, nvlink_scale, network_scale");
  return s;
}

// A list of maps, each with `index_key` (an integer below `limit`, given once) and scales.
template <typename Entry>
std::vector<Entry> read_entries(const Reader& r, const YAML::Node& root, const char* key, const char* index_key,
                                int limit, const std::string& limit_text) {
  std::vector<Entry> out;
  const YAML::Node list = root[key];
  if (!list) return out;
  if (!list.IsSequence())
    r.fail(list, key, fmt::format("must be a list, e.g. [{{{}: 0, compute_scale: 0.5}}]", index_key));
  if (list.size() > kMaxAsymmetryEntries)
    r.fail(list, key, fmt::format("has {} entries, more than the limit of {}", list.size(), kMaxAsymmetryEntries));
  std::set<int> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node e = list[i];
    const std::string path = fmt::format("{}[{}]", key, i);
    if (!e.IsMap()) r.fail(e, path, fmt::format("must be a map such as {{{}: 0, compute_scale: 0.5}}", index_key));
    for (const auto& kv : e) {
      const std::string k = kv.first.Scalar();
      const bool known = k == index_key || std::find(std::begin(kScaleKeys), std::end(kScaleKeys), k) !=
                                               std::end(kScaleKeys);
      if (!known)
        r.fail(kv.first, path, fmt::format("unknown key '{}'; known keys: {}, compute_scale, hbm_scale, "
                                           "nvlink_scale, network_scale", k, index_key));
    }
    if (!e[index_key]) r.fail(e, path, fmt::format("needs the key '{}'", index_key));
    const std::int64_t v = r.value<std::int64_t>(e, path, index_key);
    if (v < 0 || v >= limit)
      r.fail(e[index_key], path + "." + index_key, fmt::format("{} is not {}", v, limit_text));
    if (!seen.insert(int(v)).second)
      r.fail(e[index_key], path + "." + index_key, fmt::format("{} {} is listed twice; give it once", index_key, v));
    Entry entry;
    if constexpr (std::is_same_v<Entry, NodeOverride>) entry.node = int(v);
    else entry.rank = int(v);
    entry.scales = read_scales(r, e, path);
    out.push_back(entry);
  }
  return out;
}

Asymmetry read_asymmetry(const Reader& r, const YAML::Node& root, const Topology& t) {
  Asymmetry a;
  if (root["last_node_gpus"]) {
    a.last_node_gpus = r.positive_int(root, "", "last_node_gpus");
    if (a.last_node_gpus > t.node.gpus)
      r.fail(root["last_node_gpus"], "last_node_gpus",
             fmt::format("{} is more than node.gpus = {}; a last node holds 1 to {} GPUs", a.last_node_gpus,
                         t.node.gpus, t.node.gpus));
    if (a.last_node_gpus == t.node.gpus) a.last_node_gpus = 0;  // a full last node: the symmetric case
  }
  a.nodes = read_entries<NodeOverride>(r, root, "node_overrides", "node", t.nodes,
                                       fmt::format("a node of this topology (0 to {})", t.nodes - 1));
  Topology sized = t;
  sized.asymmetry.last_node_gpus = a.last_node_gpus;
  const int gpus = sized.total_gpus();
  a.stragglers = read_entries<Straggler>(r, root, "stragglers", "rank", gpus,
                                         fmt::format("a rank of this topology (0 to {})", gpus - 1));
  return a;
}

// `device: gpu | cpu`, gpu when absent: which kind of processor a rank is.
Device read_device(const model::YamlContext& ctx, const YAML::Node& root) {
  const YAML::Node n = root["device"];
  if (!n) return Device::gpu;
  const auto text = n.IsScalar() ? n.as<std::string>() : std::string();
  if (text == "gpu") return Device::gpu;
  if (text == "cpu") return Device::cpu;
  ctx.fail(n, fmt::format("device '{}' is not a device: write gpu or cpu", text));
}

// The value is loaded as a document of its own, with the limits a file has
// (size, depth, repeated keys); its errors name the --set.
void set_asymmetry(YAML::Node root, const std::string& origin, const std::string& key, const std::string& value) {
  const model::YamlContext ctx{fmt::format("{}: --set {}", origin, key)};
  root[key] = ctx.load(value);
}

// Replaces the value at a dotted path; the path must name an existing scalar
// (or be one of the asymmetry keys, which it sets or adds whole).
void apply_override(YAML::Node root, const std::string& origin, const std::string& key,
                    const std::string& value) {
  // The asymmetry keys (model::is_asymmetry_key) are optional, so `--set` may add them, and
  // lists, so their value is YAML (`--set 'stragglers=[{rank: 17, compute_scale: 0.5}]'`).
  if (model::is_asymmetry_key(key)) return set_asymmetry(root, origin, key, value);
  YAML::Node cur = root;
  std::string walked;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? dot : dot - start);
    if (part.empty() || !cur.IsMap() || !cur[part]) {
      std::string known;
      if (cur.IsMap())
        for (const auto& kv : cur) known += (known.empty() ? "" : ", ") + kv.first.as<std::string>();
      throw UserError(fmt::format("{}: --set {}={}: no key '{}' {}; known keys there: {}", origin, key,
                                  value, part, walked.empty() ? "at the top" : "under " + walked,
                                  known.empty() ? "(none: it is a value)" : known));
    }
    YAML::Node next = cur[part];
    walked = walked.empty() ? part : walked + "." + part;
    if (dot == std::string::npos) {
      if (!next.IsScalar())
        throw UserError(fmt::format("{}: --set {}: '{}' is a section; set one of its values, e.g. {}.<key>",
                                    origin, key, walked, walked));
      cur[part] = value;
      return;
    }
    cur.reset(next);  // rebind (assignment would overwrite the node's value)
    start = dot + 1;
  }
}

// Reads the NCCL table a topology names (nccl.version, with the rows of
// nccl.gpu_arch and nccl.host_cpu) into `root` at the keys the topology
// leaves out, as if it stated them (sim/nccl_table.h); a key it states is
// its own. Without nccl.version the topology states every constant itself
// (a calibrated cpu topology does).
FromTable merge_nccl_table(const model::YamlContext& ctx, YAML::Node root) {
  FromTable out;
  const YAML::Node& croot = root;
  const YAML::Node nccl = croot["nccl"];
  if (!nccl || !nccl.IsMap()) return out;  // read_nccl says what is missing
  const YAML::Node version = nccl["version"];
  if (!version) {
    for (const char* k : {"gpu_arch", "host_cpu"})
      if (nccl[k])
        ctx.fail(nccl[k], fmt::format("nccl.{} picks a row of an NCCL table: name the table with nccl.version too "
                                      "(known versions: {})",
                                      k, model::joined_names(nccl_versions())));
    return out;
  }
  const std::string v = ctx.scalar<std::string>(version, "nccl.version");
  const NcclTable* table = nullptr;
  ctx.wrap(version, [&] { table = &nccl_table(v); });
  out.version = version;
  out.name = fmt::format("NCCL {} ({})", v, table->origin);
  const auto pick = [&](const char* key, const std::vector<std::string>& known, const std::string& what) {
    const YAML::Node n = nccl[key];
    if (!n)
      ctx.fail(nccl, fmt::format("nccl needs the key '{}' with nccl.version: {} ({})", key, what,
                                 model::joined_names(known)));
    const std::string value = ctx.scalar<std::string>(n, std::string("nccl.") + key);
    if (std::find(known.begin(), known.end(), value) == known.end())
      ctx.fail(n, fmt::format("nccl.{}: '{}' is not one of {}{}", key, value, model::joined_names(known),
                              model::did_you_mean(value, known)));
    return value;
  };
  std::vector<std::string> archs;
  for (const auto& [a, row] : table->archs) archs.push_back(a);
  const std::string arch = pick("gpu_arch", archs, fmt::format("the GPU generation whose row of {} applies", out.name));
  const std::string cpu = pick("host_cpu", nccl_host_cpus(), "the host CPU's vendor, which picks NCCL's LL ceiling across nodes");
  const YAML::Node& y = *table->yaml;
  const YAML::Node row = y["gpu_arch"][arch];
  const YAML::Node cpu_row = y["ll_max_across_nodes_GBps"][nccl_cpu_row(cpu)];
  YAML::Node ll_max(YAML::NodeType::Map);
  ll_max["one_node"] = YAML::Clone(row["ll_max_GBps"]);
  ll_max["two_nodes"] = YAML::Clone(cpu_row["two_nodes"]);
  ll_max["multi_node"] = YAML::Clone(cpu_row["multi_node"]);
  const std::pair<const char*, YAML::Node> values[] = {
      {"node.nccl_link_GBps", row["nvlink_GBps"]},
      {"node.nvls_efficiency", row["nvls_efficiency"]},
      {"node.hop_latency_us", y["hop_latency_us"]["nvlink"]["ring"]},
      {"node.tree_hop_latency_us", y["hop_latency_us"]["nvlink"]["tree"]},
      {"network.hop_latency_us", y["hop_latency_us"]["net"]["ring"]},
      {"network.tree_hop_latency_us", y["hop_latency_us"]["net"]["tree"]},
      {"nccl.channel_GBps", row["channel_GBps"]},
      {"nccl.ll_max_GBps", ll_max},
      {"nccl.ll_efficiency", y["efficiency"]["ll"]},
      {"nccl.ll128_efficiency", y["efficiency"]["ll128"]},
      {"nccl.tree_efficiency", y["efficiency"]["tree"]},
      {"nccl.tree_ll_efficiency", y["efficiency"]["tree_ll"]},
      {"nccl.tree_ll128_efficiency", y["efficiency"]["tree_ll128"]},
      {"nccl.base_latency_us", y["base_latency_us"]},
  };
  for (const auto& [path, value] : values) {
    const std::string p = path;
    const std::string section = p.substr(0, p.find('.'));
    const std::string key = p.substr(p.find('.') + 1);
    const YAML::Node sec = croot[section];
    if (!sec || !sec.IsMap() || sec[key]) continue;  // the topology's own value (or a section the reader rejects)
    YAML::Node target = root[section];
    target[key] = YAML::Clone(value);
    out.keys.insert(p);
  }
  return out;
}

// The sections a topology's collectives are priced from: a GPU topology's
// node, network and nccl (NCCL's table), a cpu topology's node (its ranks)
// and mpi (MPI's fitted constants). Each kind refuses the other's, naming
// where the constants belong.
void read_collective_sections(const model::YamlContext& ctx, const Reader& r, const YAML::Node& root, Topology& t) {
  if (t.device == Device::cpu) {
    for (const char* k : {"nccl", "network"})
      if (root[k])
        ctx.fail(root[k], fmt::format("{}: is a GPU topology's (NCCL's table, the NICs); a cpu topology states MPI's "
                                      "fitted constants under mpi: (`coconet calibrate` writes them): remove it",
                                      k));
    read_cpu_node(r, root, t);
    read_mpi(r, root, t);
    return;
  }
  if (root["mpi"])
    ctx.fail(root["mpi"], "mpi: holds MPI's constants as `coconet calibrate` fits them: it needs `device: cpu` (a "
                          "GPU topology's collectives are NCCL's, under nccl:)");
  if (const YAML::Node nccl = root["nccl"]; nccl && nccl.IsMap())
    for (const char* k : {"large_messages", "per_op", "step_sync_us", "handoff_us"})
      if (nccl[k])
        ctx.fail(nccl[k], fmt::format("nccl.{0} is MPI's, fitted by `coconet calibrate` for the cpu backend: it needs "
                                      "`device: cpu`, as mpi.{0} (NCCL's cost is one formula per algorithm and protocol)",
                                      k));
  t.node = read_node(r, root);
  t.network = read_network(r, root, t.node.gpus);
  t.nccl = read_nccl(r, root);
}

}  // namespace

Topology parse_topology(const std::string& yaml_text, const std::string& origin,
                        const Overrides& overrides) {
  const model::YamlContext ctx{origin};
  YAML::Node root = ctx.load(yaml_text);
  ctx.require_map(root, "a topology");
  ctx.allow_keys(root, {"name", "description", "device", "nodes", "gpu", "node", "network", "nccl", "mpi",
                        "last_node_gpus", "node_overrides", "stragglers"},
                 "a topology");
  // The keys that pick the NCCL table are set first, then the table's values
  // are read in, then every other --set (it may replace a value the table gave).
  const auto picks_table = [](const std::string& k) {
    return k == "nccl.version" || k == "nccl.gpu_arch" || k == "nccl.host_cpu";
  };
  std::set<std::string> overridden;
  for (const auto& [k, v] : overrides)
    if (picks_table(k)) {
      apply_override(root, origin, k, v);
      overridden.insert(k);
    }
  FromTable from_table = merge_nccl_table(ctx, root);
  for (const auto& [k, v] : overrides)
    if (!picks_table(k)) {
      apply_override(root, origin, k, v);
      overridden.insert(k);
    }
  const Reader r(ctx, overridden, std::move(from_table));
  Topology t;
  t.origin = origin;
  t.name = r.value<std::string>(root, "", "name");
  t.description = r.value<std::string>(root, "", "description");
  t.device = read_device(ctx, root);
  t.nodes = r.positive_int(root, "", "nodes", model::kMaxNodes);
  t.gpu = read_gpu(r, root);
  read_collective_sections(ctx, r, root, t);
  if (std::int64_t(t.nodes) * t.node.gpus > model::kMaxGpus)
    ctx.fail(root["nodes"], fmt::format("nodes: {} nodes x {} GPUs = {} GPUs, more than the limit of {}", t.nodes,
                                        t.node.gpus, std::int64_t(t.nodes) * t.node.gpus, model::kMaxGpus));
  if (root["gpu"]["gemm_operand_GBps"] && t.device != Device::cpu)
    ctx.fail(root["gpu"]["gemm_operand_GBps"],
             "gpu.gemm_operand_GBps is the cpu backend's cost of widening and packing GEMM operands: it needs "
             "`device: cpu` (a GPU GEMM reads its operands within its arithmetic)");
  if (t.nccl.measured_latency && t.nccl.measured_latency->algo == model::Algo::nvls && !t.node.nvls)
    ctx.fail(root["nccl"]["measured_latency"], "nccl.measured_latency: an nvls measurement needs node.nvls: true");
  t.asymmetry = read_asymmetry(r, root, t);
  t.nccl.latency_correction_us = latency_correction_us(t);
  return t;
}

std::string with_nccl_table(const std::string& yaml_text, const std::string& origin) {
  const model::YamlContext ctx{origin};
  YAML::Node root = ctx.load(yaml_text);
  ctx.require_map(root, "a topology");
  if (merge_nccl_table(ctx, root).keys.empty()) return yaml_text;
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

Topology load_topology(const std::string& name_or_path, const Overrides& overrides) {
  const std::string path = model::resolve_topology(name_or_path);
  return parse_topology(model::read_file(path), path, overrides);
}

namespace {

// The symmetric cluster: nodes, GPU, NVLink, network.
std::string describe_symmetric(const Topology& t) {
  return fmt::format(
      "{}: {}\n"
      "  {} nodes x {} GPUs ({}), {} GPUs in all\n"
      "  GPU: {} SMs, HBM {:.0f} GB/s (x{:.2f}), f16 {:.3g} / bf16 {:.3g} / f32 {:.3g}{}{} TFLOP/s, "
      "launch {:.1f} us\n"
      "  NVLink: {} links x {:.1f} GB/s achievable = {:.1f} GB/s per direction{}\n"
      "  network: {} NICs x {:.0f} Gb/s (x{:.2f}) = {:.1f} GB/s per NIC{}\n",
      t.name, t.description, t.nodes, t.node.gpus, t.gpu.model, t.total_gpus(), t.gpu.sms, t.gpu.hbm_GBps,
      t.gpu.hbm_efficiency, t.gpu.tflops_f16, t.gpu.tflops_bf16, t.gpu.tflops_f32,
      t.gpu.tflops_f32_gemm ? fmt::format(" (GEMM {:.3g})", *t.gpu.tflops_f32_gemm) : "",
      t.gpu.tflops_fp8 ? fmt::format(" / fp8 {:.4g}", *t.gpu.tflops_fp8) : "", t.gpu.launch_us,
      t.node.nvlink_links, std::min(t.node.nccl_link_GBps, t.node.nvlink_link_GBps), t.node.nvlink_GBps(),
      t.node.nvls ? ", NVLS in-switch reduction" : "", t.network.nics, t.network.nic_Gbps,
      t.network.nic_efficiency, t.network.nic_GBps(),
      t.network.pod_gpus > 0 ? fmt::format("; pods of {} GPUs, 1:{:g} oversubscribed above them", t.network.pod_gpus,
                                           t.network.oversubscription)
                             : "");
}

// One line per asymmetry key set (none on a symmetric cluster).
std::string describe_asymmetry(const Topology& t) {
  const auto scales = [](const RankScales& s) {
    return fmt::format("compute x{:g}, HBM x{:g}, NVLink x{:g}, network x{:g}", s.compute, s.hbm, s.nvlink, s.network);
  };
  std::string out;
  if (t.asymmetry.last_node_gpus > 0)
    out += fmt::format("  last node: {} GPUs\n", t.asymmetry.last_node_gpus);
  for (const NodeOverride& o : t.asymmetry.nodes) out += fmt::format("  node {}: {}\n", o.node, scales(o.scales));
  for (const Straggler& g : t.asymmetry.stragglers) out += fmt::format("  rank {}: {}\n", g.rank, scales(g.scales));
  return out;
}

}  // namespace

std::string describe(const Topology& t) {
  return describe_symmetric(t) + describe_asymmetry(t);
}

}  // namespace coconet::sim
