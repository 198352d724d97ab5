// The adam workload through the tuner (see dp_block.h).
#include "step/dp_block.h"

#include <algorithm>
#include <variant>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "sim/context.h"
#include "sim/simulator.h"
#include "sim/tuner.h"

namespace coconet::step {

namespace {

constexpr const char* kWorkload = "adam";
constexpr const char* kSize = "N";      // the workload's parameter count
constexpr const char* kGradient = "g";  // the workload's gradient input

bool keeps_state_sliced(const model::Schedule& s) {
  return std::any_of(s.history.begin(), s.history.end(),
                     [](const model::Directive& d) { return std::holds_alternative<model::AsSlice>(d); });
}

}  // namespace

DpBlockPricer::DpBlockPricer(const sim::Topology& t) : topology_(t), collectives_(t) {}

const DpBlockPricer::Schedules& DpBlockPricer::schedules(model::DType grad_dtype) {
  if (const auto hit = schedules_.find(int(grad_dtype)); hit != schedules_.end()) return hit->second;
  model::Program adam = model::load_program(model::resolve_workload(kWorkload));
  bool found = false;
  for (model::TensorDecl& in : adam.inputs)
    if (in.name == kGradient) {
      in.type.dtype = grad_dtype;
      found = true;
    }
  if (!found) throw InternalError("the adam workload has no gradient input 'g'");
  model::check(adam);
  Schedules out;
  for (model::Schedule& s : model::enumerate_schedules(adam))
    (keeps_state_sliced(s) ? out.sliced : out.replicated).push_back(std::move(s));
  if (out.replicated.empty() || out.sliced.empty())
    throw InternalError("the adam workload enumerates no schedule with (or without) as_slice");
  return schedules_.emplace(int(grad_dtype), std::move(out)).first->second;
}

const DpBlock& DpBlockPricer::price(std::int64_t params, const sim::Placement& group, bool sliced_state,
                             model::DType grad_dtype) {
  const std::int64_t ranks = group.ranks;
  const std::int64_t padded = (std::max<std::int64_t>(params, 1) + ranks - 1) / ranks * ranks;
  const Key key{padded, group.ranks, group.nodes, group.per_node, group.pods, sliced_state, int(grad_dtype)};
  if (const auto hit = cache_.find(key); hit != cache_.end()) return hit->second;
  const Schedules& all = schedules(grad_dtype);
  sim::Context ctx{topology_, group.ranks, {{kSize, padded}}, std::nullopt};
  ctx.where = group;
  const sim::TuneResult r = sim::tune(sliced_state ? all.sliced : all.replicated, ctx, sim::predict_space());
  if (r.ranked.empty()) throw InternalError("the tuner ranked no schedule of the adam workload");
  DpBlock b{r.ranked.front().name, r.ranked.front().time_us};
  if (group.ranks == 1) {
    // No data-parallel group: no collective runs; each schedule whose
    // stages are plain collectives and computations costs its computations
    // alone (a fused or overlapped stage's collective cannot be told apart).
    b.time_us = -1;
    for (const sim::Candidate& c : r.ranked) {
      double compute = 0;
      bool plain = true;
      for (const sim::StageTiming& st : c.stages) {
        if (st.code == "C") compute += st.alone_us;
        else plain = plain && (st.code == "AR" || st.code == "RS" || st.code == "AG");
      }
      if (plain && (b.time_us < 0 || compute < b.time_us)) b = DpBlock{c.name, compute};
    }
    if (b.time_us < 0) throw InternalError("the adam workload has no schedule of plain collectives and computations");
  }
  return cache_.emplace(key, std::move(b)).first->second;
}

}  // namespace coconet::step
