// Schedule files with one document per point: reading, writing the `point:`
// line, and choosing the document for a point (see schedule_file.h).
#include "model/schedule_file.h"

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <sstream>

#include "model/catalog.h"
#include "model/error.h"
#include "model/points.h"

namespace coconet::model {

namespace {

[[noreturn]] void fail(const std::string& origin, const YAML::Node& n, const std::string& msg) {
  throw UserError(fmt::format("{}:{}:{}: {}", origin, n.Mark().line + 1, n.Mark().column + 1, msg));
}

SchedulePoint read_point(const std::string& origin, const YAML::Node& n) {
  static const std::set<std::string> known = {"workload", "sizes",  "ranks",  "groups",
                                              "topology", "nodes",  "backend", "predicted_us"};
  if (!n.IsMap()) fail(origin, n, "point must be a mapping (workload, sizes, ranks, groups, topology, nodes, backend)");
  for (const auto& kv : n)
    if (!known.contains(kv.first.as<std::string>()))
      fail(origin, kv.first,
           fmt::format("unknown key '{}' in point: use workload, sizes, ranks, groups, topology, nodes, backend, "
                       "predicted_us",
                       kv.first.as<std::string>()));
  SchedulePoint p;
  try {
    if (n["workload"]) p.workload = n["workload"].as<std::string>();
    if (n["sizes"]) {
      if (!n["sizes"].IsMap()) fail(origin, n["sizes"], "point.sizes must be a mapping such as {N: 4096}");
      for (const auto& kv : n["sizes"]) p.sizes[kv.first.as<std::string>()] = kv.second.as<std::int64_t>();
    }
    if (n["ranks"]) p.ranks = n["ranks"].as<int>();
    if (n["groups"]) p.groups = n["groups"].as<int>();
    if (n["topology"]) p.topology = n["topology"].as<std::string>();
    if (n["nodes"]) p.nodes = n["nodes"].as<int>();
    if (n["backend"]) p.backend = n["backend"].as<std::string>();
    if (n["predicted_us"]) p.predicted_us = n["predicted_us"].as<double>();
  } catch (const YAML::Exception& e) {
    fail(origin, n, fmt::format("point: {}", e.msg));
  }
  if (p.ranks < 1) fail(origin, n, "point.ranks must be at least 1");
  return p;
}

// The file's documents as text, each preceded by as many newlines as lines came before it.
std::vector<std::string> split_documents(const std::string& text) {
  std::vector<std::string> docs(1);
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line); ++line_no) {
    if (line.rfind("---", 0) == 0) {
      docs.emplace_back(std::string(static_cast<std::size_t>(line_no + 1), '\n'));
      continue;
    }
    docs.back() += line + "\n";
  }
  return docs;
}

bool blank(const std::string& doc) {
  std::istringstream in(doc);
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first != std::string::npos && line[first] != '#') return false;
  }
  return true;
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
  std::vector<ScheduleDocument> out;
  for (auto& text : split_documents(read_file(path))) {
    if (blank(text)) continue;
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      throw UserError(fmt::format("{}:{}:{}: malformed YAML: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
    }
    if (!root.IsMap() || !root["workload"])
      throw UserError(fmt::format("{}: every document of a schedule file is a mapping with `workload: NAME`", path));
    ScheduleDocument d{root["workload"].as<std::string>(), std::nullopt, std::move(text)};
    if (root["point"]) d.point = read_point(path, root["point"]);
    out.push_back(std::move(d));
  }
  if (out.empty()) throw UserError(fmt::format("{}: no schedule in the file", path));
  return out;
}

ChosenSchedule schedule_for_point(const Program& program, const std::string& path, const PointQuery& q) {
  const auto docs = read_schedule_documents(path);
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
  return {schedule_from_yaml(program, chosen->text, path), chosen->point};
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
