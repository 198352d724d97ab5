// Schedule files with one document per point: reading, writing the `point:`
// line, and choosing the document for a point (see schedule_file.h).
#include "model/schedule_file.h"

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "model/catalog.h"
#include "model/error.h"
#include "model/limits.h"
#include "model/points.h"
#include "model/yaml_util.h"

namespace coconet::model {

namespace {

// A count of the point (ranks, groups, nodes): a whole number in [lo, hi], read in 64 bits.
int point_count(const YamlContext& y, const YAML::Node& n, const char* key, std::int64_t lo, std::int64_t hi) {
  const auto v = y.scalar<std::int64_t>(n, fmt::format("point.{}", key));
  if (v < lo || v > hi) y.fail(n, fmt::format("point.{} = {} is out of range: it takes {} to {}", key, v, lo, hi));
  return static_cast<int>(v);  // checked above: lo <= v <= hi, and hi fits in an int
}

SchedulePoint read_point(const YamlContext& y, const YAML::Node& n) {
  y.require_map(n, "point (workload, sizes, ranks, groups, topology, nodes, backend)");
  y.allow_keys(n, {"workload", "sizes", "ranks", "groups", "topology", "nodes", "backend", "predicted_us"}, "point");
  SchedulePoint p;
  if (n["workload"]) p.workload = y.scalar<std::string>(n["workload"], "point.workload");
  if (n["sizes"]) {
    if (!n["sizes"].IsMap()) y.fail(n["sizes"], "point.sizes must be a mapping such as {N: 4096}");
    for (const auto& kv : n["sizes"]) {
      const auto name = y.scalar<std::string>(kv.first, "a size name of point.sizes");
      const auto v = y.scalar<std::int64_t>(kv.second, fmt::format("point.sizes.{}", name));
      if (v < 1) y.fail(kv.second, fmt::format("point.sizes.{} = {} must be at least 1", name, v));
      p.sizes[name] = v;
    }
  }
  if (n["ranks"]) p.ranks = point_count(y, n["ranks"], "ranks", 1, kMaxRanks);
  if (n["groups"]) p.groups = point_count(y, n["groups"], "groups", 1, kMaxGroups);
  if (n["topology"]) p.topology = y.scalar<std::string>(n["topology"], "point.topology");
  if (n["nodes"]) p.nodes = point_count(y, n["nodes"], "nodes", 0, kMaxNodes);
  if (n["backend"]) p.backend = y.scalar<std::string>(n["backend"], "point.backend");
  if (n["predicted_us"]) {
    const auto us = y.scalar<double>(n["predicted_us"], "point.predicted_us");
    if (!std::isfinite(us) || us < 0)
      y.fail(n["predicted_us"], fmt::format("point.predicted_us = {} must be a finite time of at least 0", us));
    p.predicted_us = us;
  }
  if (p.ranks < 1) y.fail(n, "point.ranks must be at least 1");
  return p;
}

std::string points_list(const std::vector<ScheduleDocument>& docs) {
  std::string out;
  for (const auto& d : docs)
    out += d.point ? fmt::format("\n  {}  [{}]", d.point->text(), d.point->flags())
                   : fmt::format("\n  {} (any point)", d.workload);
  return out;
}

}  // namespace

std::string SchedulePoint::text() const {
  return fmt::format("{} {} on {} ranks{} ({}, {} node(s), backend {})", workload, sizes_label(sizes), ranks,
                     groups > 1 ? fmt::format(" x {} groups", groups) : "", topology, nodes, backend);
}

std::string SchedulePoint::flags() const {
  std::string out;
  for (const auto& [k, v] : sizes) out += fmt::format("--set {}={} ", k, v);
  return out + fmt::format("--ranks {}", ranks * groups);
}

std::string point_yaml(const SchedulePoint& p) {
  YAML::Emitter out;
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "workload" << YAML::Value << p.workload;
  out << YAML::Key << "sizes" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : p.sizes) out << YAML::Key << k << YAML::Value << v;
  out << YAML::EndMap;
  out << YAML::Key << "ranks" << YAML::Value << p.ranks;
  out << YAML::Key << "groups" << YAML::Value << p.groups;
  out << YAML::Key << "topology" << YAML::Value << p.topology;
  out << YAML::Key << "nodes" << YAML::Value << p.nodes;
  out << YAML::Key << "backend" << YAML::Value << p.backend;
  if (p.predicted_us) out << YAML::Key << "predicted_us" << YAML::Value << *p.predicted_us;
  out << YAML::EndMap;
  return fmt::format("point: {}\n", out.c_str());
}

bool is_schedule_file(const std::string& name_or_path) {
  return name_or_path.ends_with(".yaml") || name_or_path.ends_with(".yml");
}

std::vector<ScheduleDocument> read_schedule_documents(const std::string& path) {
  return schedule_documents(read_file(path), path);
}

std::vector<ScheduleDocument> schedule_documents(const std::string& text, const std::string& path) {
  const YamlContext y{path};
  std::vector<ScheduleDocument> out;
  for (auto& root : y.load_all(text)) {
    if (!root || root.IsNull()) continue;  // an empty document (a trailing ---)
    if (!root.IsMap() || !root["workload"])
      y.fail(root, "every document of a schedule file is a mapping with `workload: NAME`");
    ScheduleDocument d{y.scalar<std::string>(root["workload"], "workload"), std::nullopt, root};
    if (root["point"]) d.point = read_point(y, root["point"]);
    out.push_back(std::move(d));
  }
  if (out.empty()) throw UserError(fmt::format("{}: no schedule in the file", path));
  return out;
}

ChosenSchedule schedule_for_point(const Program& program, const std::string& path, const PointQuery& q) {
  return schedule_for_point(program, read_schedule_documents(path), path, q);
}

ChosenSchedule schedule_for_point(const Program& program, const std::vector<ScheduleDocument>& docs,
                                  const std::string& path, const PointQuery& q) {
  std::vector<const ScheduleDocument*> same_point;
  for (const auto& d : docs) {
    if (d.workload != program.name) continue;
    if (!d.point || (d.point->sizes == q.sizes && d.point->ranks == q.ranks && d.point->groups == q.groups))
      same_point.push_back(&d);
  }
  bool has_workload = false;
  for (const auto& d : docs) has_workload = has_workload || d.workload == program.name;
  if (!has_workload)
    throw UserError(fmt::format("{} has no schedule for workload '{}'; the file has:{}", path, program.name,
                                points_list(docs)));
  if (same_point.empty()) {
    const SchedulePoint asked{program.name, q.sizes, q.ranks, q.groups, "", 0, "", std::nullopt};
    throw UserError(fmt::format("{} has no schedule for {} {} on {} ranks{}; the file has:{}\npass the flags of one "
                                "of them, or tune this point: coconet tune {} {} --out {}",
                                path, program.name, sizes_label(q.sizes), q.ranks,
                                q.groups > 1 ? fmt::format(" x {} groups", q.groups) : "", points_list(docs),
                                program.name, asked.flags(), path));
  }
  const ScheduleDocument* chosen = same_point.front();
  for (const auto* d : same_point)
    if (d->point && (q.topology.empty() || d->point->topology == q.topology) &&
        (q.backend.empty() || d->point->backend == q.backend)) {
      chosen = d;
      break;
    }
  return {schedule_from_node(program, chosen->root, path), chosen->point};
}

std::optional<Bindings> common_sizes(const std::vector<ScheduleDocument>& docs, const std::string& workload) {
  std::optional<Bindings> out;
  for (const auto& d : docs) {
    if (d.workload != workload || !d.point) continue;
    if (out && *out != d.point->sizes) return std::nullopt;
    out = d.point->sizes;
  }
  return out;
}

}  // namespace coconet::model
