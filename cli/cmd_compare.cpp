// coconet compare: one experiment predicted on two or more sides (each
// --topology, times each --nodes when several are given), side by side: the
// best schedule of each point on each side, its time, and its ratio to the
// first side (the reference; ratio = time / reference time, so above 1 is
// slower). Every side shares the experiment, --ranks, --set and --backend.
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "cli/predict_report.h"
#include "model/error.h"
#include "model/points.h"
#include "sim/predict.h"

namespace coconet::cli {

namespace {

struct CompareArgs {
  PredictArgs shared;  // target, --ranks, --set, --backend (topology and nodes come from the sides)
  std::vector<std::string> topologies;
  std::vector<int> nodes;
  Format format = Format::table;
};

struct Side {
  std::string name;  // "dgx-h100", or "dgx-h100 x2" when --nodes varies
  std::optional<std::string> topology;
  std::optional<int> nodes;
  std::vector<sim::PointReport> reports;
};

std::vector<Side> sides_of(const CompareArgs& a) {
  std::vector<std::optional<std::string>> topologies(a.topologies.begin(), a.topologies.end());
  if (topologies.empty()) topologies.emplace_back();  // the experiment's own
  std::vector<std::optional<int>> nodes(a.nodes.begin(), a.nodes.end());
  if (nodes.empty()) nodes.emplace_back();
  std::vector<Side> out;
  for (const auto& t : topologies)
    for (const auto& n : nodes) {
      std::string name = t.value_or("experiment's topology");
      if (a.nodes.size() > 1) name += fmt::format(" x{}", *n);
      out.push_back({name, t, n, {}});
    }
  if (out.size() < 2)
    throw UserError(
        "compare needs two or more sides: repeat --topology (e.g. --topology dgx-h100 --topology "
        "dgx-h200) or --nodes (e.g. --nodes 1 --nodes 2)");
  return out;
}

void predict_sides(const model::Experiment& e, const CompareArgs& a, std::vector<Side>& sides) {
  for (auto& s : sides) {
    PredictArgs p = a.shared;
    p.topology = s.topology;
    p.nodes = s.nodes;
    s.reports = sim::predict_experiment(e, p.options());
    if (s.reports.size() != sides.front().reports.size())
      throw UserError(
          fmt::format("{} has {} points but {} has {}: compare needs the same points on every side",
                      s.name, s.reports.size(), sides.front().name, sides.front().reports.size()));
  }
}

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

Table compare_table(const std::vector<Side>& sides) {
  Table t{{"workload", "sizes", "side", "best", "time_us", "ratio"}};
  for (std::size_t i = 0; i < sides.front().reports.size(); ++i) {
    const double reference_us = sides.front().reports[i].best().time_us;
    for (const auto& s : sides) {
      const sim::PointReport& r = s.reports[i];
      t.add({r.workload, r.sizes, s.name, r.best().name, r.best().time_us,
             r.best().time_us / reference_us});
    }
  }
  return t;
}

void run(const CompareArgs& a) {
  const model::Experiment e = model::experiment_from_argument(a.shared.target);
  std::vector<Side> sides = sides_of(a);
  predict_sides(e, a, sides);
  if (a.format == Format::json) return print_json(compare_json(sides));
  if (a.format == Format::table)
    fmt::print("# best schedule per point on each side; ratio = time / time on {}\n",
               sides.front().name);
  print(compare_table(sides), a.format);
}

}  // namespace

void register_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compare",
      "Predict one experiment on several topologies or node counts, side by side, with ratios");
  auto a = std::make_shared<CompareArgs>();
  cmd->add_option("target", a->shared.target,
                  "Experiment (configs/experiments/ or a YAML file) or a workload; default: the "
                  "embedded default");
  cmd->add_option("--topology,-t", a->topologies,
                  "A side: topology name or YAML file (repeatable)");
  cmd->add_option("--nodes,-N", a->nodes,
                  "Node counts to compare (repeatable; each topology at each)")
      ->check(at_least(1));
  cmd->add_option("--ranks,-r", a->shared.ranks,
                  "Ranks in all, on every side (default: as predict)")
      ->check(at_least(1));
  cmd->add_option("--set", a->shared.sets,
                  "KEY=VALUE on every side, as predict takes it (repeatable)");
  cmd->add_option("--backend", a->shared.backend,
                  "The backend the predictions are for: cuda or cpu")
      ->check(one_of({"cuda", "cpu"}))
      ->type_name("cuda|cpu");
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
