// The event simulator: runs a schedule's tasks over per-rank streams and the
// shared resources of each GPU (SMs, HBM, NVLink, network) and lets overlap and
// contention come out of the run. Stages of an overlap group run on their own
// streams chunk by chunk (chunk c of a stage waits for chunk c of the stage
// before it); every other stage waits for the one before it. While tasks run
// together, a collective keeps its channels' SMs (a GEMM beside it gets the
// rest, with its waves re-quantised) and bandwidths are shared in proportion to
// demand. At scale one representative rank per process group is simulated: in
// an SPMD step every rank of a group does the same work, and rank 0 holds the
// largest ragged slice.
#pragma once

#include <string>
#include <vector>

#include "model/schedule.h"
#include "sim/tasks.h"

namespace coconet::sim {

struct SimEvent {
  int task = 0;
  int rank = 0;
  int peer = -1;  // a send's receiving rank
  int stream = 0;
  int stage = 0;
  std::string name;
  std::string detail;
  double start_us = 0;
  double end_us = 0;
  double alone_us = 0;  // its duration with nothing beside it
};

struct StageTiming {
  std::string code;
  std::string detail;  // what bounds it (from its first task)
  double start_us = 0;
  double end_us = 0;
  double alone_us = 0;  // sum of its tasks alone
};

struct SimResult {
  double time_us = 0;
  std::vector<StageTiming> stages;
  std::vector<SimEvent> events;
  std::vector<std::string> rank_names;  // one per representative rank
  int streams = 1;
};

[[nodiscard]] SimResult simulate(const std::vector<StageWork>& work,
                                 const std::vector<model::OverlapGroup>& overlaps, const Context& ctx,
                                 const model::Knobs& knobs);
// Simulates `s` with its own knobs.
[[nodiscard]] SimResult simulate(const model::Schedule& s, const Context& ctx);

// The name of stream `i` in traces: "main", then "overlap 1", "overlap 2", ...
[[nodiscard]] std::string stream_name(int i);

}  // namespace coconet::sim
