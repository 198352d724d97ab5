// The event simulator: runs a StepPlan's tasks over per-rank streams (compute
// and comm, as the executor issues them) and the shared resources of each GPU
// (SMs, HBM, NVLink, network) and lets overlap and contention come out of the
// run. Each task waits for what sim/tasks.h says: the launch before it on its
// stream, its producers' same chunk, and the unit before. While tasks run
// together, a collective keeps its channels' SMs (a GEMM beside it gets the
// rest, with its waves re-quantised) and each bandwidth is shared max-min
// fairly in bytes (a task asking less than an equal split keeps what it
// asks). Ranks that are provably alike (sim/ranks.h: the same group, scales
// and node) are one class simulated once, so a symmetric cluster costs one
// rank per group; ranks that differ (a straggler, a slower or smaller node)
// are simulated apart, and a collective over a group is one bulk-synchronous
// task on all its classes: it starts when each is ready, ends for all
// together and goes at the rate its slowest member is granted. Every rank of
// a class is priced with rank 0's work (the largest ragged slice).
#pragma once

#include <string>
#include <vector>

#include "model/schedule.h"
#include "sim/ranks.h"
#include "sim/tasks.h"

namespace coconet::sim {

struct SimEvent {
  int task = 0;
  int rank = 0;   // the class it ran on (SimResult::classes), the first of several
  int peer = -1;  // a send's receiving class
  int stream = 0;
  int stage = 0;
  std::string name;
  std::string detail;
  double start_us = 0;
  double end_us = 0;
  double alone_us = 0;  // its duration with nothing beside it
  std::vector<int> also;        // the other classes a collective ran on
  std::vector<int> also_peers;  // the other receiving classes
};

struct StageTiming {
  std::string code;
  std::string detail;  // what bounds it (from its first task)
  double start_us = 0;
  double end_us = 0;
  // Its tasks alone, one after another, on the class of ranks where they sum
  // highest (alone_class, an index of SimResult::classes): the work that
  // bounds the stage's span, not a sum over classes that run side by side.
  double alone_us = 0;
  int alone_class = 0;
};

struct SimResult {
  double time_us = 0;
  std::vector<StageTiming> stages;
  std::vector<SimEvent> events;
  std::vector<std::string> rank_names;  // one per class of ranks: what it stands for
  std::vector<RankClass> classes;      // the classes simulated (a SimEvent's rank indexes them)
  int streams = 1;
};

[[nodiscard]] SimResult simulate(const plan::StepPlan& p, const Context& ctx);
// What a simulation writes besides its times. describe false: the tasks'
// and events' names and details and the stages' details are left empty (a
// caller that reads only the times and the stages' codes, like the step's
// layer pricers, skips formatting them); every time is the same.
struct SimOptions {
  bool describe = true;
};
[[nodiscard]] SimResult simulate(const plan::StepPlan& p, const Context& ctx, const SimOptions& o);
// Lowers `s` (its own knobs) for the context's backend and simulates the plan.
[[nodiscard]] SimResult simulate(const model::Schedule& s, const Context& ctx);

// The name of stream `i` in traces: "compute" or "comm" (plan::Stream).
[[nodiscard]] std::string stream_name(int i);

}  // namespace coconet::sim
