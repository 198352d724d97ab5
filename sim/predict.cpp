// The experiment driver: the experiment is expanded into points once
// (model::expand), each workload is enumerated once, and each point goes
// through the tuner.
#include "sim/predict.h"

#include <algorithm>

#include <fmt/core.h>

#include "model/enumerate.h"
#include "model/error.h"

namespace coconet::sim {

namespace {

PointReport predict_point(const model::Point& pt, const std::vector<model::Schedule>& schedules,
                          const Topology& t, const PredictOptions& o, const KnobSpace& space) {
  PointReport r;
  r.workload = pt.program.name;
  r.sizes = pt.label;
  r.bindings = pt.sizes;
  r.topology = t.name;
  r.nodes = t.nodes;
  r.ranks = pt.ranks_per_group;
  r.groups = pt.groups;
  const Context ctx{t, pt.ranks_per_group, pt.sizes, backend_option(o)};
  r.backend = plan::to_string(ctx.capabilities().backend);
  r.schedules = schedules;
  r.result = tune(schedules, ctx, space);
  r.baseline = model::baseline(pt.program).name();
  const auto base = std::find_if(r.result.ranked.begin(), r.result.ranked.end(),
                                 [&](const Candidate& c) { return c.name == r.baseline; });
  r.baseline_us = base != r.result.ranked.end() ? base->time_us : r.best().time_us;
  r.speedup = r.best().time_us > 0 ? r.baseline_us / r.best().time_us : 1.0;
  r.reason = dominant_stage(r.best());
  return r;
}

}  // namespace

std::optional<plan::BackendKind> backend_option(const PredictOptions& o) {
  if (!o.backend) return std::nullopt;
  return plan::parse_backend(*o.backend);
}

model::Schedule PointReport::best_schedule() const {
  model::Schedule s = schedules.at(best().schedule);
  s.knobs = best().knobs;
  return s;
}

Topology experiment_topology(const model::Experiment& e, const PredictOptions& o) {
  Overrides sets;
  const bool own = !o.topology || *o.topology == e.topology;
  if (own && e.nodes) sets.emplace_back("nodes", std::to_string(*e.nodes));
  if (own && e.gpus_per_node) sets.emplace_back("node.gpus", std::to_string(*e.gpus_per_node));
  sets.insert(sets.end(), o.sets.begin(), o.sets.end());
  if (o.nodes) sets.emplace_back("nodes", std::to_string(*o.nodes));
  return load_topology(o.topology.value_or(e.topology), sets);
}

model::PointOptions point_options(const PredictOptions& o, const Topology& t) {
  return {o.values, o.ranks, t.total_gpus(), fmt::format("{} with {} node(s)", t.name, t.nodes)};
}

std::vector<PointReport> predict_experiment(const model::Experiment& e, const PredictOptions& o) {
  const Topology t = experiment_topology(e, o);
  const KnobSpace space = o.tune_space ? tune_space(t) : o.space;
  const std::vector<model::Point> points = model::expand(e, point_options(o, t));
  std::vector<PointReport> out;
  std::vector<model::Schedule> schedules;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i == 0 || points[i].entry != points[i - 1].entry) {
      schedules = model::enumerate_schedules(points[i].program);
      if (schedules.empty()) throw InternalError("no schedules enumerated for " + points[i].program.name);
    }
    out.push_back(predict_point(points[i], schedules, t, o, space));
  }
  return out;
}

}  // namespace coconet::sim
