// Knob search. Settings that cannot change a schedule's result are skipped:
// chunk counts for schedules without overlap, any setting that pins an
// algorithm or protocol no collective can run (sim/resolve.h
// pins_apply), and any setting whose plan resolves to the same collective
// choices as a setting already simulated at that chunk count (the two price
// alike). An overlapped schedule is searched over two chunks or more
// (best_setting).
#include "sim/tuner.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/core.h>

#include "model/error.h"
#include "plan/step_plan.h"
#include "sim/resolve.h"

namespace coconet::sim {

using model::Algo;
using model::Proto;
using model::Grain;

KnobSpace predict_space() {
  return KnobSpace{{1, 2, 4, 8}, {Algo::auto_}, {Proto::auto_}, {0}, {Grain::chunk, Grain::tile}};
}

KnobSpace tune_space(const Topology& t) {
  return KnobSpace{{1, 2, 4, 8, 16},
                   {Algo::auto_, Algo::ring, Algo::tree, Algo::nvls, Algo::hierarchical},
                   {Proto::auto_, Proto::ll, Proto::ll128, Proto::simple},
                   {0, std::max(1, t.nccl.channels / kChannelSpread), t.nccl.channels * kChannelSpread},
                   {Grain::chunk, Grain::tile}};
}

namespace {

// Whether any unit of the plan is cut into chunks (so the chunk knob matters).
bool chunked(const plan::StepPlan& p) {
  return std::any_of(p.units.begin(), p.units.end(), [](const plan::Unit& u) { return u.rows > 0; });
}

// A total order on resolutions (to keep a set of them).
struct ChoicesLess {
  bool operator()(const std::vector<plan::CollectiveChoice>& a, const std::vector<plan::CollectiveChoice>& b) const {
    const auto key = [](const plan::CollectiveChoice& c) {
      return std::tuple(int(c.algo), int(c.proto), c.channels, c.local);
    };
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        [&](const auto& x, const auto& y) { return key(x) < key(y); });
  }
};

Candidate best_setting(const model::Schedule& s, plan::StepPlan& unchunked, int index, const Context& ctx,
                       const KnobSpace& space, const TuneOptions& o, int& evaluated) {
  // Lowered without resolving: every setting below resolves the plan itself.
  const auto lower_in = [&](int chunks, Grain grain) {
    model::Schedule one = s;
    one.knobs.chunks = chunks;
    one.knobs.overlap = grain;
    return plan::lower(one, unchunked.program, ctx.sizes, ctx.ranks, ctx.capabilities());
  };
  // A chunk holds at least one row: choices past the fewest rows of a chunked
  // unit are skipped. An overlap group runs in at least two chunks: in one it
  // overlaps nothing and runs as its stages in sequence, which the schedule
  // without the overlap already is (enumerate lists both), so the two would
  // be one execution under two names. A group that cannot be cut (one row,
  // or a space without a count of two or more) stays whole.
  std::int64_t max_chunks = std::numeric_limits<std::int64_t>::max();
  for (const auto& u : unchunked.units)
    if (u.rows > 0) max_chunks = std::min(max_chunks, u.rows);
  std::vector<int> choices;
  if (chunked(unchunked) && space.chunks.size() == 1) {
    // One chunk count pinned (--chunks, a tune file's knobs): cut as lowering cuts
    // it, at most the rows, so simulate prices what run executes (issue 34).
    const int pinned = space.chunks.front();
    if (pinned >= 2) choices.push_back(static_cast<int>(std::min<std::int64_t>(pinned, max_chunks)));
  } else if (chunked(unchunked)) {
    for (int c : space.chunks)
      if (c >= 2 && c <= max_chunks) choices.push_back(c);
  }
  if (choices.empty()) choices.push_back(1);
  // Grains: tile where the schedule's groups and the context's backend allow
  // it; a schedule without an overlap group has one grain (the knob changes nothing).
  std::vector<Grain> grains;
  for (Grain g : space.overlaps)
    if (g == Grain::chunk || (!s.overlaps.empty() && plan::why_not_tile(s, ctx.capabilities()).empty()))
      grains.push_back(g);
  if (grains.empty()) {  // tile pinned (--overlap tile, a tune file's knobs)
    if (!s.overlaps.empty()) throw UserError("overlap: tile: " + plan::why_not_tile(s, ctx.capabilities()));
    grains.push_back(s.knobs.overlap);
  }
  // The plan's name is the schedule's (plan::lower names it so), made once when it was lowered.
  Candidate best{index, unchunked.schedule, s.knobs, std::numeric_limits<double>::infinity()};
  const std::vector<RankClass> classes = rank_classes(ctx.topology, unchunked.ranks_per_group, unchunked.groups,
                                                      ctx.rank_mode);
  std::optional<plan::StepPlan> chunked_plan;
  for (int chunks : choices)
    for (Grain grain : grains) {
    // Lowered once per chunk count and grain: the other knobs do not change the plan,
    // only its pricing. In one chunk, the plan given (resolved in place: each
    // resolution below rewrites every choice, so what it held before is never read).
    const bool given = chunks == 1 && grain == unchunked.knobs.overlap;
    plan::StepPlan& p = given ? unchunked : chunked_plan.emplace(lower_in(chunks, grain));
    bool improved = false;
    std::set<std::vector<plan::CollectiveChoice>, ChoicesLess> seen;  // the resolutions simulated
    for (Algo a : space.algos)
      for (Proto pr : space.protos)
        for (int ch : space.channels) {
          p.knobs = model::Knobs{chunks, a, pr, ch, grain};
          if (!pins_apply(p, ctx, p.knobs)) continue;
          resolve_collectives(p, ctx, classes);
          if (!seen.insert(choices_of(p)).second) continue;  // priced alike to a setting already simulated
          SimResult r = simulate(p, ctx, SimOptions{o.describe});
          ++evaluated;
          if (r.time_us < best.time_us) {
            best.knobs = p.knobs;
            best.time_us = r.time_us;
            best.stages = std::move(r.stages);
            improved = true;
          }
        }
    if (!improved || !o.analytic) continue;
    // The analytic model on the same plan, at the best knobs so far (the plan
    // holds their resolution already when they were the last simulated).
    if (!(p.knobs == best.knobs)) {
      p.knobs = best.knobs;
      resolve_collectives(p, ctx, classes);
    }
    best.analytic_us = predict_analytic(p, ctx).time_us;
    }
  return best;
}

}  // namespace

namespace {
// Schedule i lowered in one chunk with program i. With `list` (share_programs'
// of these schedules): with its facts i (a schedule's facts do not depend on
// its knobs), the values sized once per program of the same values.
std::vector<plan::StepPlan> lower_unchunked(const std::vector<model::Schedule>& schedules,
                                            const std::vector<std::shared_ptr<const model::Program>>& programs,
                                            const ScheduleList* list, const Context& ctx) {
  std::vector<plan::StepPlan> out;
  out.reserve(schedules.size());
  const plan::Capabilities caps = ctx.capabilities();
  std::vector<plan::SizedViews> views(list ? schedules.size() : 0);
  const auto lower = [&](const model::Schedule& s, std::size_t i) {
    if (list)
      return plan::lower(s, programs[i], list->facts[i], views[list->values_of[i]], ctx.sizes, ctx.ranks, caps);
    return plan::lower(s, programs[i], ctx.sizes, ctx.ranks, caps);
  };
  for (std::size_t i = 0; i < schedules.size(); ++i) {
    const model::Schedule& s = schedules[i];
    if (s.knobs.chunks == 1) {
      out.push_back(lower(s, i));
      continue;
    }
    model::Schedule one = s;
    one.knobs.chunks = 1;
    out.push_back(lower(one, i));
  }
  return out;
}
}  // namespace

std::vector<plan::StepPlan> lower_unchunked(const std::vector<model::Schedule>& schedules, const Context& ctx) {
  std::vector<std::shared_ptr<const model::Program>> programs;
  programs.reserve(schedules.size());
  for (const model::Schedule& s : schedules) programs.push_back(std::make_shared<const model::Program>(s.program));
  return lower_unchunked(schedules, programs, nullptr, ctx);
}

ScheduleList share_programs(std::vector<model::Schedule> schedules) {
  ScheduleList out;
  out.programs.reserve(schedules.size());
  out.facts.reserve(schedules.size());
  out.values_of.reserve(schedules.size());
  for (const model::Schedule& s : schedules) {
    out.programs.push_back(std::make_shared<const model::Program>(s.program));
    out.facts.push_back(plan::schedule_facts(s, *out.programs.back()));
    std::size_t first = 0;
    while (!plan::same_values(*out.programs[first], s.program)) ++first;  // at the latest: s itself
    out.values_of.push_back(first);
  }
  out.schedules = std::move(schedules);
  return out;
}

std::vector<plan::StepPlan> lower_unchunked(const ScheduleList& list, const Context& ctx) {
  const bool found = list.facts.size() == list.schedules.size() &&
                     list.values_of.size() == list.schedules.size();  // a list made by share_programs
  return lower_unchunked(list.schedules, list.programs, found ? &list : nullptr, ctx);
}

TuneResult tune(const std::vector<model::Schedule>& schedules, const Context& ctx, const KnobSpace& space) {
  std::vector<plan::StepPlan> unchunked = lower_unchunked(schedules, ctx);
  return tune(schedules, unchunked, ctx, space);
}

TuneResult tune(const std::vector<model::Schedule>& schedules, std::vector<plan::StepPlan>& unchunked,
                const Context& ctx, const KnobSpace& space, const TuneOptions& o) {
  if (unchunked.size() != schedules.size())
    throw InternalError(fmt::format("tune: {} schedules with {} lowered plans", schedules.size(), unchunked.size()));
  TuneResult out;
  for (std::size_t i = 0; i < schedules.size(); ++i)
    out.ranked.push_back(best_setting(schedules[i], unchunked[i], int(i), ctx, space, o, out.evaluated));
  std::stable_sort(out.ranked.begin(), out.ranked.end(),
                   [](const Candidate& a, const Candidate& b) { return a.time_us < b.time_us; });
  // First: the one model::predicted_best names (of equal predictions, the fewest stages).
  const std::size_t best = model::predicted_best_of(
      out.ranked, [](const Candidate& c) { return c.time_us; },
      [&](const Candidate& c) { return schedules[std::size_t(c.schedule)].stages.size(); });
  const auto first = out.ranked.begin() + std::ptrdiff_t(best);
  std::rotate(out.ranked.begin(), first, first + 1);
  return out;
}

std::string dominant_stage(const Candidate& c) {
  double total = 0;
  const StageTiming* top = nullptr;
  for (const auto& st : c.stages) {
    total += st.alone_us;
    if (!top || st.alone_us > top->alone_us) top = &st;
  }
  if (!top || total <= 0) return "no work";
  return fmt::format("{} is {:.0f}% of the work ({})", top->code, 100.0 * top->alone_us / total, top->detail);
}

}  // namespace coconet::sim
