// The adam workload through the tuner (see dp_block.h).
#include "step/dp_block.h"

#include <algorithm>
#include <variant>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "sim/context.h"
#include "sim/tuner.h"

namespace coconet::step {

namespace {

constexpr const char* kWorkload = "adam";
constexpr const char* kSize = "N";  // the workload's parameter count

bool keeps_state_sliced(const model::Schedule& s) {
  return std::any_of(s.history.begin(), s.history.end(),
                     [](const model::Directive& d) { return std::holds_alternative<model::AsSlice>(d); });
}

}  // namespace

DpBlockPricer::DpBlockPricer(const sim::Topology& t) : topology_(t) {}

void DpBlockPricer::enumerate() {
  if (!sliced_.empty()) return;  // once, at the first price(): many steps never need a block
  const model::Program adam = model::load_program(model::resolve_workload(kWorkload));
  for (model::Schedule& s : model::enumerate_schedules(adam))
    (keeps_state_sliced(s) ? sliced_ : replicated_).push_back(std::move(s));
  if (replicated_.empty() || sliced_.empty())
    throw InternalError("the adam workload enumerates no schedule with (or without) as_slice");
}

DpBlock DpBlockPricer::price(std::int64_t params, const sim::Placement& group, bool sliced_state) {
  const std::int64_t ranks = group.ranks;
  const std::int64_t padded = (std::max<std::int64_t>(params, 1) + ranks - 1) / ranks * ranks;
  const Key key{padded, group.ranks, group.nodes, group.per_node, sliced_state};
  if (const auto hit = cache_.find(key); hit != cache_.end()) return hit->second;
  enumerate();
  sim::Context ctx{topology_, group.ranks, {{kSize, padded}}, std::nullopt};
  ctx.where = group;
  const sim::TuneResult r = sim::tune(sliced_state ? sliced_ : replicated_, ctx, sim::predict_space());
  if (r.ranked.empty()) throw InternalError("the tuner ranked no schedule of the adam workload");
  const DpBlock b{r.ranked.front().name, r.ranked.front().time_us};
  cache_.emplace(key, b);
  return b;
}

}  // namespace coconet::step
