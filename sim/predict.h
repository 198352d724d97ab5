// Predicting an experiment: for each workload and each point of its size
// sweeps, every enumerated schedule through the tuner on the experiment's
// topology, ranked, with the speed-up of the best over the paper's baseline
// (the unscheduled program: AR-C, MM-AR-C, AR-P2P-C) and why it wins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/experiment.h"
#include "model/schedule.h"
#include "sim/topology.h"
#include "sim/tuner.h"

namespace coconet::sim {

struct PredictOptions {
  std::optional<std::string> topology;  // instead of the experiment's
  std::optional<int> nodes;             // instead of the experiment's and the topology's
  std::optional<int> ranks;             // ranks per process group, for every workload
  Overrides sets;                       // --set key=value on the topology
  Overrides sizes;                      // --set SIZE=value on every workload that has that size
  KnobSpace space = predict_space();
  bool tune_space = false;              // use tune_space(topology) instead of `space`
};

struct PointReport {
  std::string workload;
  std::string sizes;        // the swept sizes, e.g. "N=335708160"
  model::Bindings bindings;
  std::string topology;
  int nodes = 0;
  int ranks = 0;            // per process group
  int groups = 1;
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

// The ranks per process group of one workload run: the option, the run's, the
// experiment's, else all GPUs over the program's groups. Throws UserError when
// the groups do not fit on the topology.
[[nodiscard]] int group_size(const model::Experiment& e, const model::WorkloadRun& run, const Topology& t,
                             const model::Program& p, const std::optional<int>& option = std::nullopt);

// The topology an experiment runs on, with the options applied.
[[nodiscard]] Topology experiment_topology(const model::Experiment& e, const PredictOptions& o);
[[nodiscard]] std::vector<PointReport> predict_experiment(const model::Experiment& e, const PredictOptions& o);

// The experiment compiled into the binary (configs/experiments/default.yaml).
[[nodiscard]] const std::string& default_experiment_yaml();

// What a command's positional argument names: nothing (the embedded default),
// an experiment (configs/experiments/NAME.yaml or a path), or a workload
// (workloads/NAME.yaml or a path): a one-workload experiment on dgx-h100.
[[nodiscard]] model::Experiment experiment_from_argument(const std::optional<std::string>& arg);

// Splits `--set KEY=VALUE` texts: dotted keys and `nodes` go to the topology,
// plain names (N, B, ...) are workload sizes.
void split_sets(const std::vector<std::string>& texts, PredictOptions& o);

}  // namespace coconet::sim
