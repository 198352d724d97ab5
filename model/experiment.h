// Experiments: which workloads, which values of their symbolic sizes (single
// values or sweeps), which topology, and run options. One format shared by
// predict, run and validate. The default experiment is compiled into the binary.
//
// Keys: name, topology, nodes?, gpus_per_node?, ranks?, iters?, warmup?,
// workloads: [{workload: NAME, sizes?: {SIZE: int | [int, ...]},
//              scalars?: {NAME: float}, ranks?: int}]. Unknown keys are errors.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/program.h"

namespace coconet::model {

struct WorkloadRun {
  std::string workload;                                // a name in workloads/, or a path
  std::map<std::string, std::vector<std::int64_t>> sizes;  // sweeps; the product is run
  std::map<std::string, double> scalars;
  std::optional<int> ranks;  // ranks per process group; default: all GPUs / groups
};

struct Experiment {
  std::string name;
  std::string topology = "dgx-h100";
  std::optional<int> nodes;
  std::optional<int> gpus_per_node;
  std::optional<int> ranks;
  int iters = 10;
  int warmup = 2;
  std::vector<WorkloadRun> workloads;
};

[[nodiscard]] Experiment parse_experiment(const std::string& yaml_text, const std::string& origin);
[[nodiscard]] Experiment load_experiment(const std::string& path);

// Every combination of a run's size sweeps, on top of the program's defaults.
[[nodiscard]] std::vector<Bindings> size_points(const WorkloadRun& run, const Program& p);

}  // namespace coconet::model
