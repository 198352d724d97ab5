// The one expansion of an experiment (or a named workload) into points: the
// programs are loaded once, the entry's scalars and the --set values applied,
// the ranks per group decided, and the size sweeps multiplied.
#include "model/points.h"

#include <fmt/core.h>

#include <algorithm>

#include "model/catalog.h"
#include "model/error.h"
#include "model/limits.h"
#include "model/parse.h"

namespace coconet::model {

namespace {

#include "model_generated/default_experiment.inc"

// An entry's scalars, then the --set values `p` has: a size replaces the
// entry's sweep of it, a scalar the program's value.
void apply_values(WorkloadRun& run, Program& p, const Assignments& sets) {
  for (const auto& [k, v] : run.scalars) {
    if (!p.scalars.contains(k))
      throw UserError(fmt::format(
          "the experiment sets scalar '{}' of workload '{}', which has no such scalar", k, p.name));
    p.scalars[k] = v;
  }
  for (const auto& [k, v] : sets) {
    if (p.params.contains(k)) run.sizes[k] = {parse_size(k, v)};
    if (p.scalars.contains(k)) p.scalars[k] = parse_scalar(k, v);
  }
}

void check_names(const std::vector<Program>& programs, const Assignments& sets) {
  for (const auto& [name, v] : sets) {
    const std::string& k = name;  // (clang 14 cannot capture a structured binding)
    const bool known = std::any_of(programs.begin(), programs.end(), [&k](const Program& p) {
      return p.params.contains(k) || p.scalars.contains(k);
    });
    if (!known) throw unknown_name(k, v, programs);
  }
}

int ranks_per_group(const Experiment& e, const WorkloadRun& run, const Program& p,
                    const PointOptions& o) {
  const int groups = p.groups();
  if (o.ranks) {
    if (*o.ranks < 1 || *o.ranks % groups != 0)
      throw UserError(fmt::format(
          "--ranks {}: {} spans {} process groups, so its ranks (the world size) must be "
          "a positive multiple of {}",
          *o.ranks, p.name, groups, groups));
    return *o.ranks / groups;
  }
  if (run.ranks) return *run.ranks;
  if (e.ranks) return *e.ranks;
  // (an experiment's ranks are checked against kMaxRanks when it is parsed)
  return o.total_gpus ? std::max(1, *o.total_gpus / groups) : 1;
}

void check_fits(const Program& p, int ranks, const PointOptions& o) {
  const int need = ranks * p.groups();
  if (!o.total_gpus || need <= *o.total_gpus) return;
  throw UserError(fmt::format(
      "{} needs {} process group(s) x {} ranks = {} GPUs, but {} has {}; lower its ranks "
      "(--ranks) or describe a larger machine (--nodes, --topology)",
      p.name, p.groups(), ranks, need, o.machine.empty() ? "the machine" : o.machine,
      *o.total_gpus));
}

// A workload on its own: the default experiment narrowed to it, at its own sizes.
Experiment workload_experiment(const std::string& path) {
  const Program p = load_program(path);
  Experiment e = default_experiment();
  e.name = p.name;
  WorkloadRun run{path, {}, {}, std::nullopt};
  for (const auto& w : e.workloads)
    if (w.workload == p.name) run.ranks = w.ranks;
  e.workloads = {run};
  return e;
}

}  // namespace

std::vector<Point> expand(const Experiment& e, const PointOptions& o) {
  std::vector<Program> programs;
  for (const auto& run : e.workloads)
    programs.push_back(load_program(resolve_workload(run.workload)));
  check_names(programs, o.sets);
  std::vector<Point> out;
  for (std::size_t i = 0; i < e.workloads.size(); ++i) {
    WorkloadRun run = e.workloads[i];
    Program p = programs[i];
    apply_values(run, p, o.sets);
    const int ranks = ranks_per_group(e, run, p, o);
    check_range(std::int64_t(ranks) * p.groups(), 1, kMaxRanks,
                fmt::format("the world size (ranks per group x {} process groups) of {}", p.groups(), p.name));
    check_fits(p, ranks, o);
    for (auto& sizes : size_points(run, p)) {
      check_tensor_sizes(p, sizes_label(sizes), sizes);
      Point pt{i, p, sizes, sizes_label(sizes), ranks, p.groups()};
      pt.program.params = std::move(sizes);
      out.push_back(std::move(pt));
    }
  }
  return out;
}

std::string sizes_label(const Bindings& sizes) {
  std::string out;
  for (const auto& [k, v] : sizes) out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v);
  return out;
}

const std::string& default_experiment_yaml() {
  static const std::string text(kDefaultExperimentYaml);
  return text;
}

Experiment default_experiment() {
  return parse_experiment(default_experiment_yaml(), "<embedded default experiment>");
}

Experiment experiment_from_argument(const std::optional<std::string>& arg) {
  if (!arg) return default_experiment();
  std::string experiment_error;
  try {
    return load_experiment(resolve_experiment(*arg));
  } catch (const UserError& e) {
    experiment_error = e.what();
  }
  std::string path;
  try {
    path = resolve_workload(*arg);
  } catch (const UserError& e) {
    const bool looks_like_path =
        arg->find('/') != std::string::npos || arg->ends_with(".yaml") || arg->ends_with(".yml");
    // A path, or a name the system could not look up (too long, a link loop): that error as it is.
    const bool both_unknown = experiment_error.starts_with("unknown experiment ") &&
                              std::string(e.what()).starts_with("unknown workload ");
    if (looks_like_path || !both_unknown)
      throw UserError(fmt::format("'{}' is neither an experiment nor a workload: {}", *arg, experiment_error));
    // A name: both kinds are candidates, so both are listed and the nearest of either suggested.
    const auto experiments = list_names("configs/experiments");
    const auto workloads = list_names("workloads");
    std::vector<std::string> all = experiments;
    all.insert(all.end(), workloads.begin(), workloads.end());
    throw UserError(fmt::format("'{}' is neither an experiment nor a workload{}: experiments are {} (in {}/{}); "
                                "workloads are {} (in {}/{}); or give a path to a .yaml file",
                                *arg, did_you_mean(*arg, all), joined_names(experiments), data_root(),
                                "configs/experiments", joined_names(workloads), data_root(), "workloads"));
  }
  return workload_experiment(path);
}

}  // namespace coconet::model
