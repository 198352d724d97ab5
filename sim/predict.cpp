// The experiment driver: workloads are loaded and enumerated once, each size
// point gets its own context (group size, sizes) and goes through the tuner.
#include "sim/predict.h"

#include <algorithm>

#include <fmt/core.h>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"

namespace coconet::sim {

namespace {

#include "sim_generated/default_experiment.inc"

std::string swept_sizes(const model::WorkloadRun& run, const model::Bindings& b) {
  std::string out;
  for (const auto& [name, values] : run.sizes)
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, b.at(name));
  return out.empty() ? "defaults" : out;
}

}  // namespace

int group_size(const model::Experiment& e, const model::WorkloadRun& run, const Topology& t,
               const model::Program& p, const std::optional<int>& option) {
  const int ranks = option.value_or(run.ranks.value_or(e.ranks.value_or(default_group_size(t, p))));
  if (ranks < 1) throw UserError(fmt::format("workload {}: ranks must be at least 1, got {}", run.workload, ranks));
  if (ranks * p.groups() > t.total_gpus())
    throw UserError(fmt::format("workload {} needs {} process group(s) x {} ranks = {} GPUs, but {} with {} "
                                "node(s) has {}; lower its ranks or raise --nodes",
                                run.workload, p.groups(), ranks, ranks * p.groups(), t.name, t.nodes,
                                t.total_gpus()));
  return ranks;
}

namespace {

PointReport predict_point(const model::WorkloadRun& run, const model::Program& p,
                          const std::vector<model::Schedule>& schedules, const model::Bindings& b,
                          const Topology& t, int ranks, const KnobSpace& space) {
  PointReport r;
  r.workload = p.name;
  r.sizes = swept_sizes(run, b);
  r.bindings = b;
  r.topology = t.name;
  r.nodes = t.nodes;
  r.ranks = ranks;
  r.groups = p.groups();
  r.schedules = schedules;
  const Context ctx{t, ranks, b};
  r.result = tune(schedules, ctx, space);
  r.baseline = model::baseline(p).name();
  const auto base = std::find_if(r.result.ranked.begin(), r.result.ranked.end(),
                                 [&](const Candidate& c) { return c.name == r.baseline; });
  r.baseline_us = base != r.result.ranked.end() ? base->time_us : r.best().time_us;
  r.speedup = r.best().time_us > 0 ? r.baseline_us / r.best().time_us : 1.0;
  r.reason = dominant_stage(r.best());
  return r;
}

}  // namespace

model::Schedule PointReport::best_schedule() const {
  model::Schedule s = schedules.at(best().schedule);
  s.knobs = best().knobs;
  return s;
}

Topology experiment_topology(const model::Experiment& e, const PredictOptions& o) {
  Overrides sets;
  if (e.nodes) sets.emplace_back("nodes", std::to_string(*e.nodes));
  if (e.gpus_per_node) sets.emplace_back("node.gpus", std::to_string(*e.gpus_per_node));
  sets.insert(sets.end(), o.sets.begin(), o.sets.end());
  if (o.nodes) sets.emplace_back("nodes", std::to_string(*o.nodes));
  return load_topology(o.topology.value_or(e.topology), sets);
}

namespace {

// Applies `--set SIZE=value` to the runs whose program has that size.
model::WorkloadRun with_sizes(model::WorkloadRun run, const model::Program& p, const Overrides& sizes) {
  for (const auto& [name, value] : sizes) {
    if (!p.params.contains(name)) continue;
    try {
      run.sizes[name] = {std::stoll(value)};
    } catch (const std::exception&) {
      throw UserError(fmt::format("--set {}={}: a size must be an integer", name, value));
    }
  }
  return run;
}

void check_sizes_known(const std::vector<model::Program>& programs, const Overrides& sizes) {
  for (const auto& [name, value] : sizes) {
    std::string known;
    bool found = false;
    for (const auto& p : programs)
      for (const auto& [k, v] : p.params) {
        found = found || k == name;
        known += (known.empty() ? "" : ", ") + k;
      }
    if (!found)
      throw UserError(fmt::format("--set {}={}: no workload of the experiment has a size '{}' (sizes: {}); "
                                  "topology values are dotted, e.g. gpu.hbm_GBps",
                                  name, value, name, known.empty() ? "none" : known));
  }
}

}  // namespace

std::vector<PointReport> predict_experiment(const model::Experiment& e, const PredictOptions& o) {
  const Topology t = experiment_topology(e, o);
  const KnobSpace space = o.tune_space ? tune_space(t) : o.space;
  std::vector<model::Program> programs;
  for (const auto& run : e.workloads) programs.push_back(model::load_program(model::resolve_workload(run.workload)));
  check_sizes_known(programs, o.sizes);
  std::vector<PointReport> out;
  for (std::size_t i = 0; i < e.workloads.size(); ++i) {
    const model::Program& p = programs[i];
    const model::WorkloadRun run = with_sizes(e.workloads[i], p, o.sizes);
    const int ranks = group_size(e, run, t, p, o.ranks);
    const std::vector<model::Schedule> schedules = model::enumerate_schedules(p);
    if (schedules.empty()) throw InternalError("no schedules enumerated for " + p.name);
    for (const auto& b : model::size_points(run, p))
      out.push_back(predict_point(run, p, schedules, b, t, ranks, space));
  }
  return out;
}

const std::string& default_experiment_yaml() {
  static const std::string text(kDefaultExperimentYaml);
  return text;
}

model::Experiment experiment_from_argument(const std::optional<std::string>& arg) {
  if (!arg) return model::parse_experiment(default_experiment_yaml(), "<embedded default experiment>");
  std::string experiment_error;
  try {
    return model::load_experiment(model::resolve_experiment(*arg));
  } catch (const UserError& e) {
    experiment_error = e.what();
  }
  std::string path;
  try {
    path = model::resolve_workload(*arg);
  } catch (const UserError&) {
    throw UserError(fmt::format("'{}' is neither an experiment nor a workload: {}", *arg, experiment_error));
  }
  const model::Program p = model::load_program(path);
  model::Experiment e;
  e.name = p.name;
  e.workloads.push_back(model::WorkloadRun{path, {}, {}, std::nullopt});
  return e;
}

void split_sets(const std::vector<std::string>& texts, PredictOptions& o) {
  for (const auto& text : texts) {
    auto kv = model::parse_assignment(text);
    const bool topology = kv.first.find('.') != std::string::npos || kv.first == "nodes";
    (topology ? o.sets : o.sizes).push_back(std::move(kv));
  }
}

}  // namespace coconet::sim
