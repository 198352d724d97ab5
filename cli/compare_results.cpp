// See compare_results.h.
#include "cli/compare_results.h"

#include <fmt/core.h>

#include "cli/json_out.h"
#include "model/error.h"

namespace coconet::cli {

std::vector<Side> compare_sides(const std::vector<std::string>& topology_names, const std::vector<int>& node_counts) {
  std::vector<std::optional<std::string>> topologies(topology_names.begin(), topology_names.end());
  if (topologies.empty()) topologies.emplace_back();  // the experiment's own
  std::vector<std::optional<int>> nodes(node_counts.begin(), node_counts.end());
  if (nodes.empty()) nodes.emplace_back();
  std::vector<Side> out;
  for (const auto& t : topologies)
    for (const auto& n : nodes) {
      std::string name = t.value_or("experiment's topology");
      if (node_counts.size() > 1) name += fmt::format(" x{}", *n);
      out.push_back({name, t, n, {}});
    }
  if (out.size() < 2)
    throw UserError(
        "compare needs two or more sides: repeat --topology (e.g. --topology dgx-h100 --topology "
        "dgx-h200) or --nodes (e.g. --nodes 1 --nodes 2)");
  return out;
}

void predict_sides(const model::Experiment& e, const PredictArgs& shared, std::vector<Side>& sides) {
  for (auto& s : sides) {
    PredictArgs p = shared;
    p.topology = s.topology;
    p.nodes = s.nodes;
    s.reports = sim::predict_experiment(e, p.options());
    if (s.reports.size() != sides.front().reports.size())
      throw UserError(
          fmt::format("{} has {} points but {} has {}: compare needs the same points on every side",
                      s.name, s.reports.size(), sides.front().name, sides.front().reports.size()));
  }
}

namespace {

// The result of point `i` on one side, relative to the reference side.
nlohmann::json result_json(const Side& s, const sim::PointReport& r, double reference_us) {
  return {{"side", s.name},
          {"topology", r.topology},
          {"nodes", r.nodes},
          {"backend", r.backend},
          {"best", r.best().name},
          {"knobs", knobs_json(r.best().knobs)},
          {"time_us", r.best().time_us},
          {"ratio", r.best().time_us / reference_us}};
}

}  // namespace

nlohmann::json compare_json(const std::vector<Side>& sides) {
  nlohmann::json names = nlohmann::json::array();
  for (const auto& s : sides) names.push_back(s.name);
  nlohmann::json points = nlohmann::json::array();
  for (std::size_t i = 0; i < sides.front().reports.size(); ++i) {
    const sim::PointReport& ref = sides.front().reports[i];
    nlohmann::json results = nlohmann::json::array();
    for (const auto& s : sides) results.push_back(result_json(s, s.reports[i], ref.best().time_us));
    points.push_back({{"workload", ref.workload},
                      {"sizes", sizes_json(ref.bindings)},
                      {"label", ref.sizes},
                      {"ranks", ref.ranks},
                      {"results", results}});
  }
  return tagged("compare",
                {{"sides", names}, {"reference", sides.front().name}, {"points", points}});
}

}  // namespace coconet::cli
