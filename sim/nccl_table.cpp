// Reading NCCL's constants table (configs/nccl/<version>.yaml): strict keys,
// ranges checked as a topology's (latencies zero or more, bandwidths
// positive, efficiencies in (0, 1], an NVLS efficiency may be 0), errors at
// file:line, each version read once per process.
#include "sim/nccl_table.h"

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>

#include "model/catalog.h"
#include "model/error.h"
#include "model/yaml_util.h"

namespace coconet::sim {

namespace {

constexpr const char* kTableFolder = "configs/nccl";

class TableReader {
 public:
  explicit TableReader(model::YamlContext ctx) : ctx_(std::move(ctx)) {}

  YAML::Node map(const YAML::Node& parent, const std::string& path, const char* key,
                 std::initializer_list<const char*> keys) const {
    const YAML::Node n = parent[key];
    if (!n)
      ctx_.fail(parent,
                fmt::format("{} needs the key '{}'", path.empty() ? "an NCCL table" : path, key));
    ctx_.require_map(n, join(path, key));
    if (keys.size() > 0) ctx_.allow_keys(n, keys, join(path, key));
    return n;
  }

  double number(const YAML::Node& parent, const std::string& path, const char* key) const {
    const YAML::Node n = parent[key];
    if (!n) ctx_.fail(parent, fmt::format("{} needs the key '{}'", path, key));
    const double v = ctx_.scalar<double>(n, join(path, key));
    if (!std::isfinite(v))
      ctx_.fail(n, fmt::format("{}: must be a finite number, got {}", join(path, key), v));
    return v;
  }
  double latency(const YAML::Node& parent, const std::string& path, const char* key) const {
    const double v = number(parent, path, key);
    if (v < 0)
      ctx_.fail(parent[key],
                fmt::format("{}: a latency must be zero or more, got {}", join(path, key), v));
    return v;
  }
  double bandwidth(const YAML::Node& parent, const std::string& path, const char* key) const {
    const double v = number(parent, path, key);
    if (!(v > 0) || !std::isnormal(v))
      ctx_.fail(parent[key], fmt::format("{}: a bandwidth must be a positive number, got {}",
                                         join(path, key), v));
    return v;
  }
  double efficiency(const YAML::Node& parent, const std::string& path, const char* key,
                    bool zero_ok = false) const {
    const double v = number(parent, path, key);
    if (v > 1.0 || v < 0 || (!zero_ok && v == 0))
      ctx_.fail(parent[key], fmt::format("{}: is an efficiency and must lie in {}0, 1], got {}",
                                         join(path, key), zero_ok ? "[" : "(", v));
    return v;
  }
  ProtoTable protos(const YAML::Node& parent, const std::string& path, const char* key) const {
    const YAML::Node n = map(parent, path, key, {"ll", "ll128", "simple"});
    const std::string p = join(path, key);
    return {latency(n, p, "ll"), latency(n, p, "ll128"), latency(n, p, "simple")};
  }

  const model::YamlContext& ctx() const { return ctx_; }

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }

 private:
  model::YamlContext ctx_;
};

// The GPU generations NCCL's tables have a row for (compCapIndex), in its order.
constexpr const char* kArchs[] = {"volta", "ampere", "hopper", "blackwell"};

}  // namespace

const std::vector<std::string>& nccl_host_cpus() {
  static const std::vector<std::string> kCpus = {"intel", "amd", "arm", "power", "mixed"};
  return kCpus;
}

std::string nccl_cpu_row(const std::string& host_cpu) {
  return host_cpu == "amd" || host_cpu == "mixed" ? "amd" : "other";
}

NcclTable parse_nccl_table(const std::string& yaml_text, const std::string& origin) {
  const model::YamlContext ctx{origin};
  const YAML::Node root = ctx.load(yaml_text);
  ctx.require_map(root, "an NCCL table");
  ctx.allow_keys(root,
                 {"version", "source", "base_latency_us", "hop_latency_us", "efficiency",
                  "gpu_arch", "ll_max_across_nodes_GBps"},
                 "an NCCL table");
  const TableReader r(ctx);
  NcclTable t;
  t.origin = origin;
  t.yaml = std::make_shared<const YAML::Node>(root);
  if (!root["version"]) ctx.fail(root, "an NCCL table needs the key 'version' (e.g. \"2.28\")");
  t.version = ctx.scalar<std::string>(root["version"], "version");
  if (!root["source"])
    ctx.fail(root,
             "an NCCL table needs the key 'source' (the NCCL release and commit it is read from)");
  t.source = ctx.scalar<std::string>(root["source"], "source");

  const YAML::Node base = r.map(root, "", "base_latency_us", {"ring", "tree", "nvls"});
  t.ring_base_us = r.protos(base, "base_latency_us", "ring");
  t.tree_base_us = r.protos(base, "base_latency_us", "tree");
  t.nvls_base_us = r.protos(base, "base_latency_us", "nvls");

  const YAML::Node hop = r.map(root, "", "hop_latency_us", {"nvlink", "net"});
  const YAML::Node nvlink = r.map(hop, "hop_latency_us", "nvlink", {"ring", "tree"});
  const YAML::Node net = r.map(hop, "hop_latency_us", "net", {"ring", "tree"});
  t.nvlink_ring_hop_us = r.protos(nvlink, "hop_latency_us.nvlink", "ring");
  t.nvlink_tree_hop_us = r.protos(nvlink, "hop_latency_us.nvlink", "tree");
  t.net_ring_hop_us = r.protos(net, "hop_latency_us.net", "ring");
  t.net_tree_hop_us = r.protos(net, "hop_latency_us.net", "tree");

  const YAML::Node eff =
      r.map(root, "", "efficiency", {"ll", "ll128", "tree", "tree_ll", "tree_ll128"});
  t.ll_efficiency = r.efficiency(eff, "efficiency", "ll");
  t.ll128_efficiency = r.efficiency(eff, "efficiency", "ll128");
  t.tree_efficiency = r.efficiency(eff, "efficiency", "tree");
  t.tree_ll_efficiency = r.efficiency(eff, "efficiency", "tree_ll");
  const YAML::Node tree_ll128 = r.map(eff, "efficiency", "tree_ll128", {"one_node", "multi_node"});
  t.tree_ll128_one_node_efficiency = r.efficiency(tree_ll128, "efficiency.tree_ll128", "one_node");
  t.tree_ll128_multi_node_efficiency =
      r.efficiency(tree_ll128, "efficiency.tree_ll128", "multi_node");

  const YAML::Node archs = r.map(root, "", "gpu_arch", {"volta", "ampere", "hopper", "blackwell"});
  for (const char* a : kArchs) {
    if (!archs[a]) continue;
    const std::string p = std::string("gpu_arch.") + a;
    const YAML::Node row = r.map(archs, "gpu_arch", a,
                                 {"nvlink_GBps", "channel_GBps", "ll_max_GBps", "nvls_efficiency"});
    t.archs[a] = NcclArchRow{
        r.bandwidth(row, p, "nvlink_GBps"), r.bandwidth(row, p, "channel_GBps"),
        r.bandwidth(row, p, "ll_max_GBps"), r.efficiency(row, p, "nvls_efficiency", true)};
  }
  if (t.archs.empty())
    ctx.fail(archs, "gpu_arch: give at least one of volta, ampere, hopper, blackwell");

  const YAML::Node cpus = r.map(root, "", "ll_max_across_nodes_GBps", {"amd", "other"});
  for (const char* c : {"amd", "other"}) {
    const std::string p = std::string("ll_max_across_nodes_GBps.") + c;
    const YAML::Node row = r.map(cpus, "ll_max_across_nodes_GBps", c, {"two_nodes", "multi_node"});
    t.cpus[c] = NcclCpuRow{r.bandwidth(row, p, "two_nodes"), r.bandwidth(row, p, "multi_node")};
  }
  return t;
}

std::vector<std::string> nccl_versions() { return model::list_names(kTableFolder); }

const NcclTable& nccl_table(const std::string& version) {
  static std::mutex mutex;
  static std::map<std::string, NcclTable> loaded;  // by file path: each table read once
  const std::vector<std::string> known = nccl_versions();
  if (std::find(known.begin(), known.end(), version) == known.end())
    throw UserError(
        fmt::format("no NCCL table for version '{}'{}: known versions are {} ({})", version,
                    model::did_you_mean(version, known), model::joined_names(known),
                    (std::filesystem::path(model::data_root()) / kTableFolder).string()));
  const std::string path =
      (std::filesystem::path(model::data_root()) / kTableFolder / (version + ".yaml")).string();
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(path);
  if (it == loaded.end()) {
    NcclTable t = parse_nccl_table(model::read_file(path), path);
    if (t.version != version)
      throw UserError(fmt::format(
          "{}: version '{}' in a file named for version '{}': the file name is the version", path,
          t.version, version));
    it = loaded.emplace(path, std::move(t)).first;
  }
  return it->second;
}

}  // namespace coconet::sim
