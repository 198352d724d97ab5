// The results of predict, tune, simulate and collective, computed and built as
// the JSON objects their `--format json` prints, in one place for the
// `coconet` command (cli/cmd_*.cpp) and the Python module (python/), so that
// the two never differ. Part of the coconet_results library (cli/CMakeLists.txt)
// with format, json_out and knob_args; the commands add flags and printing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/format.h"
#include "cli/knob_args.h"
#include "model/points.h"
#include "model/schedule.h"
#include "sim/collective.h"
#include "sim/predict.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace coconet::cli {

// What predict, tune and simulate share: the target (an experiment or a
// workload, model::experiment_from_argument), topology, nodes, ranks (the
// world size), --set for topology fields, workload sizes and scalars, and the
// backend the prediction is for.
struct PredictArgs {
  std::optional<std::string> target;
  std::optional<std::string> topology;
  std::optional<int> nodes;
  std::optional<int> ranks;
  std::vector<std::string> sets;  // "KEY=VALUE"
  std::optional<std::string> backend;

  [[nodiscard]] sim::PredictOptions options() const;
};

// Every schedule of every point of the target, predicted and ranked; `tune`:
// over every knob (sim::tune_space) instead of predict's.
[[nodiscard]] std::vector<sim::PointReport> predict_points(const PredictArgs& a, bool tune);

// The reports as one coconet.<kind>/1 object ("predict" or "tune"), {"points": [...]}.
[[nodiscard]] nlohmann::json point_reports_json(const std::vector<sim::PointReport>& reports,
                                                const std::string& kind);

// "MM 62%": the stage of `c` that takes the longest alone, and its share.
[[nodiscard]] std::string dominant_text(const sim::Candidate& c);

// What `tune --out` writes: one YAML document per point, separated by `---`,
// each naming its point as data (model/schedule_file.h) so that run and
// simulate can pick theirs.
[[nodiscard]] std::string best_schedules_yaml(const std::vector<sim::PointReport>& reports);

// simulate: one schedule (a name, or a schedule YAML file such as tune wrote)
// of each point of the target that has it, with the knobs predict would
// choose for it; the knob flags pin theirs.
struct SimulateArgs {
  PredictArgs predict;
  std::string schedule;
  KnobArgs knobs;
};

struct SimulatedPoint {
  model::Point point;
  model::Schedule schedule;  // with the knobs it was simulated with
  sim::SimResult result;
  double analytic_us = 0;
};

struct Simulation {
  sim::Topology topology;
  std::string backend;        // predicted for: as asked, or the topology's device's (as predict's "backend")
  bool backend_asked = false;  // named by --backend (else the topology's device decided)
  std::vector<SimulatedPoint> points;
};

// Throws UserError for bad knobs, and when no point has the schedule.
[[nodiscard]] Simulation simulate_points(const SimulateArgs& a);

// The stages of a simulated point: what simulate prints, and its JSON rows.
// alone_us is a stage's tasks alone, one after another, on one class of ranks;
// where ranks are simulated apart, the class where they sum highest, named in
// an alone_ranks column.
[[nodiscard]] Table stage_table(const sim::SimResult& r);

// The coconet.simulate/1 object, {"points": [...]}.
[[nodiscard]] nlohmann::json simulation_json(const Simulation& s);

// collective: the cost model's nccl-tests, one row per size from `begin` to
// `end` (K, M, G suffixes), times `factor`.
struct CollectiveArgs {
  std::string op = "allreduce";
  std::string topology = "dgx-h100";
  std::optional<int> nodes;
  std::optional<int> gpus;  // per node taking part; default: all of the node's
  std::string begin = "8";
  std::string end = "8G";
  int factor = 2;
  std::string algo = "auto";
  std::string proto = "auto";
  int channels = 0;
  std::vector<std::string> sets;  // "KEY=VALUE" on the topology
};

struct CollectiveSweep {
  std::string op;
  std::string topology;
  sim::Placement where;
  Table table;  // bytes, time_us, algbw_GBps, busbw_GBps, algo, proto
};

// Throws UserError for a bad size range, factor, channel count, op or topology.
[[nodiscard]] CollectiveSweep collective_sweep(const CollectiveArgs& a);

// The coconet.collective/1 object, {"op", "topology", "ranks", "rows": [...]}.
[[nodiscard]] nlohmann::json collective_json(const CollectiveSweep& s);

}  // namespace coconet::cli
