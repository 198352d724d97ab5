// Predicting an experiment: for each point (model/points.h: a workload at one
// value of every size, on so many ranks per group), every enumerated schedule
// through the tuner on the experiment's topology, ranked, with the speed-up of
// the best over the paper's baseline (the unscheduled program: AR-C, MM-AR-C,
// AR-P2P-C) and why it wins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/experiment.h"
#include "model/points.h"
#include "model/schedule.h"
#include "plan/capabilities.h"
#include "sim/topology.h"
#include "sim/tuner.h"

namespace coconet::sim {

struct PredictOptions {
  std::optional<std::string> topology;  // instead of the experiment's
  std::optional<int> nodes;             // instead of the experiment's and the topology's
  std::optional<int> ranks;             // the world size, for every workload (model/points.h)
  Overrides sets;                       // --set key=value on the topology
  model::Assignments values;            // --set NAME=value: sizes and scalars of the workloads
  std::optional<std::string> backend;   // cuda or cpu: the backend the prediction is for
  KnobSpace space = predict_space();
  bool tune_space = false;              // use tune_space(topology) instead of `space`
};

// The backend option as a kind (nullopt: the topology's device decides); throws UserError for another name.
[[nodiscard]] std::optional<plan::BackendKind> backend_option(const PredictOptions& o);

struct PointReport {
  std::string workload;
  std::string sizes;        // model::sizes_label, e.g. "N=335708160"
  model::Bindings bindings;
  std::string topology;
  int nodes = 0;
  int ranks = 0;            // per process group
  int groups = 1;
  std::string backend;  // the backend the prediction is for (the option, else the topology's device's)
  std::vector<model::Schedule> schedules;  // as enumerated; Candidate::schedule indexes it
  TuneResult result;
  std::string baseline;
  double baseline_us = 0;
  double speedup = 1;       // baseline over best
  std::string reason;       // why the best is fast: its dominant stage

  [[nodiscard]] const Candidate& best() const { return result.ranked.front(); }
  // The best schedule with its knobs, ready for model::to_yaml.
  [[nodiscard]] model::Schedule best_schedule() const;
};

// The topology an experiment runs on, with the options applied. The
// experiment's nodes and GPUs per node describe its own topology: with
// --topology naming another, that one's own counts apply (--nodes still does).
[[nodiscard]] Topology experiment_topology(const model::Experiment& e, const PredictOptions& o);

// The options model::expand needs from a prediction on `t`.
[[nodiscard]] model::PointOptions point_options(const PredictOptions& o, const Topology& t);

[[nodiscard]] std::vector<PointReport> predict_experiment(const model::Experiment& e, const PredictOptions& o);

}  // namespace coconet::sim
