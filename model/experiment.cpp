// Experiments: workloads x size sweeps x topology, shared by predict/run/validate.
#include "model/experiment.h"

#include <fmt/core.h>

#include "model/catalog.h"
#include "model/yaml_util.h"

namespace coconet::model {

namespace {

WorkloadRun parse_run(const YamlContext& y, const YAML::Node& n) {
  y.require_map(n, "a workload entry");
  y.allow_keys(n, {"workload", "sizes", "scalars", "ranks"}, "a workload entry");
  WorkloadRun run;
  run.workload = y.required<std::string>(n, "workload", "a workload entry");
  if (const auto sizes = n["sizes"]) {
    y.require_map(sizes, "sizes");
    for (const auto& kv : sizes) {
      const auto key = kv.first.as<std::string>();
      std::vector<std::int64_t> values;
      if (kv.second.IsSequence()) {
        for (const auto& v : kv.second) values.push_back(y.scalar<std::int64_t>(v, "size " + key));
      } else {
        values.push_back(y.scalar<std::int64_t>(kv.second, "size " + key));
      }
      if (values.empty()) y.fail(kv.second, fmt::format("size {} has an empty list of values", key));
      for (const auto v : values)
        if (v <= 0) y.fail(kv.second, fmt::format("size {} = {} must be positive", key, v));
      run.sizes[key] = std::move(values);
    }
  }
  if (const auto scalars = n["scalars"]) {
    y.require_map(scalars, "scalars");
    for (const auto& kv : scalars)
      run.scalars[kv.first.as<std::string>()] = y.scalar<double>(kv.second, "scalar");
  }
  if (const auto r = n["ranks"]) {
    const int v = y.scalar<int>(r, "ranks");
    if (v <= 0) y.fail(r, fmt::format("ranks = {} must be positive", v));
    run.ranks = v;
  }
  return run;
}

template <typename T>
std::optional<T> positive(const YamlContext& y, const YAML::Node& root, const char* key) {
  const auto n = root[key];
  if (!n) return std::nullopt;
  const T v = y.scalar<T>(n, key);
  if (v <= 0) y.fail(n, fmt::format("{} = {} must be positive", key, v));
  return v;
}

}  // namespace

Experiment parse_experiment(const std::string& yaml_text, const std::string& origin) {
  const YamlContext y{origin};
  const YAML::Node root = y.load(yaml_text);
  y.require_map(root, "an experiment");
  y.allow_keys(root, {"name", "topology", "nodes", "gpus_per_node", "ranks", "iters", "warmup",
                      "workloads"},
               "an experiment");
  Experiment e;
  e.name = y.optional<std::string>(root, "name", "experiment");
  e.topology = y.optional<std::string>(root, "topology", e.topology);
  e.nodes = positive<int>(y, root, "nodes");
  e.gpus_per_node = positive<int>(y, root, "gpus_per_node");
  e.ranks = positive<int>(y, root, "ranks");
  e.iters = positive<int>(y, root, "iters").value_or(e.iters);
  if (const auto w = root["warmup"]) {
    e.warmup = y.scalar<int>(w, "warmup");
    if (e.warmup < 0) y.fail(w, "warmup must be 0 or more");
  }
  const auto list = root["workloads"];
  if (!list || !list.IsSequence() || list.size() == 0)
    y.fail(root, "an experiment needs 'workloads', a list of {workload: NAME, sizes: {...}}");
  for (const auto& n : list) e.workloads.push_back(parse_run(y, n));
  return e;
}

Experiment load_experiment(const std::string& path) {
  return parse_experiment(read_file(path), path);
}

std::vector<Bindings> size_points(const WorkloadRun& run, const Program& p) {
  for (const auto& [k, v] : run.sizes)
    if (!p.params.count(k))
      throw UserError(fmt::format("experiment sets size '{}' but workload '{}' has no such size",
                                  k, p.name));
  std::int64_t count = 1;
  std::string product;
  for (const auto& [k, values] : run.sizes) {
    count = values.empty() ? count : checked_mul(count, std::int64_t(values.size()), "points of " + p.name);
    product += fmt::format("{}{} ({} values)", product.empty() ? "" : " x ", k, values.size());
    if (count > kMaxPoints)
      throw UserError(fmt::format("the sweeps of workload '{}' give {} points, more than the limit of {} points "
                                  "per experiment entry: {}; sweep fewer sizes",
                                  p.name, count, kMaxPoints, product));
  }
  std::vector<Bindings> points{p.params};
  for (const auto& [k, values] : run.sizes) {
    std::vector<Bindings> next;
    for (const auto& b : points)
      for (const auto v : values) {
        Bindings c = b;
        c[k] = v;
        next.push_back(std::move(c));
      }
    points = std::move(next);
  }
  return points;
}

}  // namespace coconet::model
