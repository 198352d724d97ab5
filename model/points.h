// Points: an experiment, or one named workload, expanded into what predict,
// tune, simulate, run and validate each work on (one program at one value of
// every size, on so many ranks per process group), so that every command
// applies the same defaults, the same `--set` rules (model/set_flag.h) and
// prints the same size labels.
//
// Defaults, in order (the README's "Points"):
// - target: nothing is the embedded default experiment
//   (configs/experiments/default.yaml); a workload name or file is that
//   experiment narrowed to the workload, at the workload's own default sizes,
//   with the ranks of its entry there (e.g. megatron_mlp: 8 ranks, one node);
// - ranks per process group: `--ranks` (the world size, so a pipeline of 2
//   groups and --ranks 16 has 8 per group), else the entry's `ranks`, else the
//   experiment's `ranks`, else all GPUs of the machine over the groups;
// - sizes: `--set` replaces an entry's sweep; the sweeps multiply;
// - label: every size of the point, "B=8 H=3072 S=1024".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "model/set_flag.h"
#include "model/experiment.h"
#include "model/program.h"

namespace coconet::model {

struct PointOptions {
  Assignments sets;               // --set sizes and scalars, on every workload that has them
  std::optional<int> ranks;       // --ranks: the world size (process groups x ranks per group)
  std::optional<int> total_gpus;  // of the machine; none: as many as the points ask for
  std::string machine;            // the machine, for messages: "dgx-h100 (4 node(s))"
};

struct Point {
  std::size_t entry = 0;  // the experiment's workload entry it comes from
  Program program;        // with the entry's and --set scalars; params are `sizes`
  Bindings sizes;         // every size of the program
  std::string label;      // sizes_label(sizes)
  int ranks_per_group = 1;
  int groups = 1;  // process groups (pipeline stages) of the program

  [[nodiscard]] int world_size() const { return ranks_per_group * groups; }
};

// Every point of `e`, entry by entry, sweeps multiplied. Throws UserError for a
// --set name no workload has, a value that breaks the rules, a world size
// the groups do not divide, or points that need more GPUs than the machine's.
[[nodiscard]] std::vector<Point> expand(const Experiment& e, const PointOptions& o);

// "B=8 H=3072 S=1024": every size, in name order.
[[nodiscard]] std::string sizes_label(const Bindings& sizes);

// The experiment compiled into the binary (configs/experiments/default.yaml).
[[nodiscard]] const std::string& default_experiment_yaml();
[[nodiscard]] Experiment default_experiment();

// What a command's positional argument names: nothing (the embedded default),
// an experiment (configs/experiments/NAME.yaml or a path), or a workload
// (workloads/NAME.yaml or a path; see the defaults above).
[[nodiscard]] Experiment experiment_from_argument(const std::optional<std::string>& arg);

}  // namespace coconet::model
