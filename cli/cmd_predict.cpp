// coconet predict: every schedule of every workload and size of an experiment
// (the embedded default when no file is given), predicted on its topology and
// ranked, with the speed-up of the best over the paper's baseline and the stage
// that dominates it. Also holds the flags and report printing that `tune`
// (and simulate, compare) share; the JSON is built in results.cpp.
#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/predict_report.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "model/set_flag.h"
#include "model/points.h"
#include "model/catalog.h"
#include "sim/predict.h"
#ifdef COCONET_VALIDATION_HAVE_RUN
#include "validation/machine_identity.h"
#endif

namespace coconet::cli {

namespace {

std::string knobs_text(const model::Knobs& k, bool all) {
  std::string s = fmt::format("chunks={}{}", k.chunks, k.overlap == model::Grain::tile ? " tile" : "");
  if (all)
    s += fmt::format(" {}/{} channels={}", model::to_string(k.algo), model::to_string(k.proto),
                     k.channels == 0 ? std::string("default") : std::to_string(k.channels));
  return s;
}

// The ranked schedules of a point. `csv`: one row per schedule of every point
// (the point's columns first, each knob in its own column); else the table
// printed under the point's title, knobs as one column.
Table point_table(const sim::PointReport& r, bool all_knobs, bool csv) {
  Table t;
  if (csv) t.columns = {"workload", "sizes", "ranks"};
  for (const char* c : {"rank", "schedule", "time_us", "speedup", "analytic_us"}) t.columns.push_back(c);
  if (csv) t.columns.insert(t.columns.end(), {"chunks", "algo", "proto", "channels", "overlap"});
  else t.columns.push_back("knobs");
  t.columns.push_back("dominant");
  std::int64_t rank = 1;
  for (const auto& c : r.result.ranked) {
    std::vector<Cell> row;
    if (csv) row = {r.workload, r.sizes, std::int64_t(r.ranks)};
    for (Cell cell : std::vector<Cell>{rank++, c.name, c.time_us, r.baseline_us / c.time_us, c.analytic_us})
      row.push_back(std::move(cell));
    if (csv)
      row.insert(row.end(), {std::int64_t(c.knobs.chunks), model::to_string(c.knobs.algo),
                             model::to_string(c.knobs.proto), std::int64_t(c.knobs.channels),
                             model::to_string(c.knobs.overlap)});
    else row.emplace_back(knobs_text(c.knobs, all_knobs));
    row.emplace_back(dominant_text(c));
    t.add(std::move(row));
  }
  return t;
}

#ifdef COCONET_VALIDATION_HAVE_RUN
// One warning line on stderr when the predictions are for the cpu backend on
// a topology calibrated on another machine (validation/machine_identity.h).
void warn_other_machine(const PredictArgs& a, const std::vector<sim::PointReport>& reports) {
  const bool cpu = std::any_of(reports.begin(), reports.end(), [](const auto& r) { return r.backend == "cpu"; });
  if (!cpu) return;
  const std::string ref = a.topology ? *a.topology : model::experiment_from_argument(a.target).topology;
  const std::string w = validation::other_machine_warning(
      ref, "these predictions are for that machine (`coconet calibrate --backend cpu --out FILE` writes a "
           "topology of this one)");
  if (!w.empty()) fmt::print(stderr, "warning: {}\n", w);
}
#else
void warn_other_machine(const PredictArgs&, const std::vector<sim::PointReport>&) {}
#endif

}  // namespace

void add_predict_flags(CLI::App* cmd, PredictArgs& a, bool target_required) {
  auto* target = cmd->add_option("target", a.target,
                                 "Experiment (configs/experiments/ or a YAML file) or a workload; default: the "
                                 "embedded default");
  if (target_required) target->required();
  cmd->add_option("--topology,-t", a.topology, "Topology name or YAML file (default: the experiment's)");
  cmd->add_option("--nodes,-N", a.nodes, "Nodes (default: the experiment's, else the topology's)")
      ->check(at_least(1));
  cmd->add_option("--ranks,-r", a.ranks,
                  "Ranks in all, the world size: process groups x ranks per group (default: the experiment's "
                  "ranks per group, else all GPUs)")
      ->check(at_least(1));
  cmd->add_option("--set", a.sets,
                  "KEY=VALUE: a topology value (dotted, e.g. gpu.hbm_GBps=4000, or nodes), a workload size "
                  "(e.g. N=1048576, N=4K, N=1e6) or scalar (e.g. lr=0.1); repeatable");
  cmd->add_option("--backend", a.backend, "The backend the prediction is for: cuda or cpu")
      ->check(one_of({"cuda", "cpu"}))
      ->type_name("cuda|cpu");
}

void print_point_reports(const std::vector<sim::PointReport>& reports, Format f, const std::string& kind) {
  const bool all_knobs = kind != "predict";
  if (f == Format::json) {
    print_json(point_reports_json(reports, kind));
    return;
  }
  if (f == Format::csv) {
    Table all;
    for (const auto& r : reports) {
      Table t = point_table(r, all_knobs, true);
      all.columns = t.columns;
      for (auto& row : t.rows) all.add(std::move(row));
    }
    print(all, f);
    return;
  }
  for (const auto& r : reports) {
    fmt::print("== {} {} on {} ({} node(s)), {} ranks per group{}{}\n", r.workload, r.sizes, r.topology, r.nodes,
               r.ranks, r.groups > 1 ? fmt::format(" x {} groups", r.groups) : "",
               ", backend " + r.backend);
    fmt::print("   best: {}, {:.2f}x over {}: {}\n", r.best().name, r.speedup, r.baseline, r.reason);
    print(point_table(r, all_knobs, false), f);
    fmt::print("\n");
  }
}

void register_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict", "Predict and rank every schedule of an experiment's workloads");
  struct Args {
    PredictArgs predict;
    Format format = Format::table;
  };
  auto a = std::make_shared<Args>();
  add_predict_flags(cmd, a->predict);
  add_format_option(cmd, a->format);
  cmd->callback([a] {
    const auto reports = predict_points(a->predict, /*tune=*/false);
    warn_other_machine(a->predict, reports);
    print_point_reports(reports, a->format, "predict");
  });
}

}  // namespace coconet::cli
