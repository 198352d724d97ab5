// Collective resolution: the one pass that decides how every collective call
// of a StepPlan runs (NCCL's algorithm, protocol and channel count), written
// into the plan (plan::Collective::chosen, one choice per chunk) before any
// pricing. The simulator then prices what the plan says (sim/tasks.h reads
// the choices and chooses nothing), `coconet show --plan` prints it, the
// tuner compares knob settings by it, and `coconet run` derives the cuda
// backend's NCCL settings from it.
//
// The rule, per unit of the plan (units run one after another, so no unit's
// choice changes another's time):
// - what the plan's knobs pin (model::Knobs algo, proto, channels) is kept;
//   a pinned algorithm or protocol that a collective cannot run falls back
//   to NCCL's own choice for that collective (sim::predict_collective_or_auto);
// - what they leave open is chosen for the unit's time alone: each setting
//   of NCCL's algorithms (ring, tree, NVLS; never hierarchical, which is
//   three NCCL calls, run only by name) and protocols that some collective
//   of the unit can run, and, where the unit computes beside its collectives
//   with channels left to the default, the default channels and
//   kChannelSpread fewer and more; in each setting every collective takes
//   the fastest pair the setting leaves it (NCCL's own rule,
//   sim::predict_collective with auto), and the setting under which the
//   unit's tasks alone end first is kept (the first of equal ones).
// Each chunk's calls are resolved on their own size, so chunks of unequal
// rows may differ. A call on one rank is `local`.
#pragma once

#include <functional>
#include <vector>

#include "plan/step_plan.h"
#include "sim/context.h"
#include "sim/ranks.h"

namespace coconet::sim {

// The factor between the channel counts a unit may run with: NCCL's default
// (the topology's nccl.channels), that over kChannelSpread and that times
// kChannelSpread. NCCL's own steps in channels are factors of two: its graph
// search duplicates a graph's channels to nChannels*2 (NCCL 2.28
// src/graph/search.cc, ncclTopoDupChannels), so half the default is NCCL's
// graph before that step and twice it the same step once more. The tuner's
// channel knob (sim/tuner.h tune_space) tries the same three counts.
inline constexpr int kChannelSpread = 2;

// Resolves every collective call of `p` on the context's topology (and on
// the slowest rates of the classes it runs on, as the simulator prices it),
// overwriting any earlier resolution; sets p.resolved_on. The classes are
// those simulate() uses (rank_classes of the context), or the ones given.
void resolve_collectives(plan::StepPlan& p, const Context& ctx);
void resolve_collectives(plan::StepPlan& p, const Context& ctx,
                         const std::vector<RankClass>& classes);

// Resolves a plan the executor runs on `topology` for `backend` (its groups
// and sizes as lowered): what exec::RunOptions::resolve takes, so that a run
// applies the choices its prediction priced (`coconet run` and `validate`
// on the cuda backend).
[[nodiscard]] std::function<void(plan::StepPlan&)> resolve_on(Topology topology, plan::BackendKind backend);

// Whether the algorithm and protocol `k` pins can be run by some collective
// of `p` (true when neither is pinned). A setting for which it is false
// resolves each collective to NCCL's own choice without the unit's search:
// the tuner skips it (sim/tuner.cpp).
[[nodiscard]] bool pins_apply(const plan::StepPlan& p, const Context& ctx, const model::Knobs& k);

// Every collective choice of a resolved plan, op by op, chunk by chunk: two
// plans of the same lowering with equal choices price alike.
[[nodiscard]] std::vector<plan::CollectiveChoice> choices_of(const plan::StepPlan& p);

}  // namespace coconet::sim
