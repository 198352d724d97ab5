// Knob search. Settings that cannot change a schedule's result are skipped:
// chunk counts for schedules without overlap, algorithms or protocols that none
// of its collectives can use (the collective would fall back to auto).
#include "sim/tuner.h"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/core.h>

namespace coconet::sim {

using model::Algo;
using model::Proto;

KnobSpace predict_space() {
  return KnobSpace{{1, 2, 4, 8}, {Algo::auto_}, {Proto::auto_}, {0}};
}

KnobSpace tune_space(const Topology& t) {
  constexpr int kChannelSpread = 2;  // try half and twice NCCL's default
  return KnobSpace{{1, 2, 4, 8, 16},
                   {Algo::auto_, Algo::ring, Algo::tree, Algo::nvls, Algo::hierarchical},
                   {Proto::auto_, Proto::ll, Proto::ll128, Proto::simple},
                   {0, std::max(1, t.nccl.channels / kChannelSpread), t.nccl.channels * kChannelSpread}};
}

namespace {

std::set<CollOp> ops_of(const std::vector<StageWork>& work) {
  std::set<CollOp> ops;
  for (const auto& w : work)
    for (const auto& c : w.collectives) ops.insert(c.op);
  return ops;
}

bool relevant(const Context& ctx, const std::set<CollOp>& ops, Algo a, Proto p) {
  if (ops.empty()) return a == Algo::auto_ && p == Proto::auto_;
  const Placement where = ctx.placement();
  for (CollOp op : ops) {
    if (a == Algo::auto_ && p == Proto::auto_) return true;
    if (a == Algo::auto_) {
      for (Algo x : {Algo::ring, Algo::tree, Algo::nvls, Algo::hierarchical})
        if (supported(ctx.topology, op, where, x, p)) return true;
    } else {
      for (Proto x : {Proto::ll, Proto::ll128, Proto::simple})
        if ((p == Proto::auto_ || p == x) && supported(ctx.topology, op, where, a, x)) return true;
    }
  }
  return false;
}

Candidate best_setting(const model::Schedule& s, int index, const Context& ctx, const KnobSpace& space,
                       int& evaluated) {
  const std::vector<StageWork> work = stage_work(s, ctx);
  const std::set<CollOp> ops = ops_of(work);
  const std::vector<int> one = {1};
  const std::vector<int>& chunk_choices = s.overlaps.empty() ? one : space.chunks;
  Candidate best{index, s.name(), s.knobs, std::numeric_limits<double>::infinity()};
  for (int chunks : chunk_choices)
    for (Algo a : space.algos)
      for (Proto p : space.protos) {
        if (!relevant(ctx, ops, a, p)) continue;
        for (int ch : space.channels) {
          if (ops.empty() && ch != 0) continue;
          const model::Knobs knobs{chunks, a, p, ch};
          SimResult r = simulate(work, s.overlaps, ctx, knobs);
          ++evaluated;
          if (r.time_us < best.time_us) {
            best.knobs = knobs;
            best.time_us = r.time_us;
            best.stages = std::move(r.stages);
          }
        }
      }
  best.analytic_us = predict_analytic(work, s.overlaps, ctx, best.knobs).time_us;
  return best;
}

}  // namespace

TuneResult tune(const std::vector<model::Schedule>& schedules, const Context& ctx, const KnobSpace& space) {
  TuneResult out;
  for (std::size_t i = 0; i < schedules.size(); ++i)
    out.ranked.push_back(best_setting(schedules[i], int(i), ctx, space, out.evaluated));
  std::stable_sort(out.ranked.begin(), out.ranked.end(),
                   [](const Candidate& a, const Candidate& b) { return a.time_us < b.time_us; });
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
