// The per-call collective choice through NCCL's tuner plugin interface:
// libcoconet_nccl_tuner.so (exec/nccl_tuner/tuner_plugin.cpp), which NCCL
// loads when NCCL_TUNER_PLUGIN names it, answers NCCL's question for each
// collective call (which algorithm, protocol and channels) with the choice
// the plan resolved for that call (plan::Collective::chosen, sim/resolve.h)
// instead of NCCL's own rule. The process that issues the calls tells the
// plugin, before a call, what that call is to run (coconet_tuner_expect);
// the plugin matches NCCL's question to it by the NCCL function and the
// call's size as NCCL states it (nBytes: elementSize x the larger of the
// send and receive counts, which is the nccl-tests size the plan's
// collectives carry: sim/collective.h). A call it was told nothing of, or
// whose choice NCCL does not offer for it (its cost table entry ignored),
// keeps NCCL's own choice.
//
// The cuda backend tells it through exec/nccl_tuner/per_call.h, from the
// choices the executor hands it for each launch (Backend::choose_collectives)
// of a plan resolved on the run's topology (`coconet run` and `validate`
// with --backend cuda, which name the plugin in NCCL_TUNER_PLUGIN).
#pragma once

#include <cstddef>

extern "C" {
// What the next call of NCCL function `coll` (ncclFunc_t) over `bytes` runs:
// `algo` (NCCL_ALGO_*), `proto` (NCCL_PROTO_*), `channels` (0: NCCL's).
// A later expectation for the same function and size replaces it.
void coconet_tuner_expect(int coll, std::size_t bytes, int algo, int proto, int channels);
// Forgets every expectation.
void coconet_tuner_clear();
}

namespace coconet::exec::nccl_tuner {
// The plugin symbol NCCL looks up: tuner interface v4, one of those NCCL
// 2.28 loads (its src/plugin/tuner/tuner_v4.cc).
inline constexpr const char* kPluginSymbol = "ncclTunerPlugin_v4";
}  // namespace coconet::exec::nccl_tuner
