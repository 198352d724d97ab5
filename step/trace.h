// A Chrome trace (Perfetto JSON, the conventions of sim/trace.h: "M" events
// naming processes and threads, "X" events with ts and dur in microseconds) of
// one predicted training step: a process per pipeline stage; on its compute
// thread each micro-batch's forward, recomputation and backward of each of its
// model chunks, then the optimizer; on its communication thread the chunk's
// tensor-parallel collectives, the pipeline sends and the exposed
// data-parallel reduction. The ops are laid out by the pipeline schedule
// (step/pipeline.h) with the composition's times, so the last event ends at
// the step time and each stage's busy times are the breakdown's.
#pragma once

#include <string>
#include <vector>

#include "step/compose.h"

namespace coconet::step {

// Forward and backward chunk passes a trace holds (2 x micro-batches x
// virtual stages x pp): a few events each, about 250 bytes of JSON an event;
// 2^17 passes keep a trace under about 100 MB. Llama 3 405B on 8192 GPUs has
// 8192.
inline constexpr std::int64_t kMaxTraceOps = std::int64_t{1} << 17;

enum class TraceThread { compute = 0, communication = 1 };

struct TraceEvent {
  std::string name;
  std::string category;  // forward, recompute, backward, tp, cp, ep (all-to-all), pp_send, dp, optimizer
  int stage = 0;
  TraceThread thread = TraceThread::compute;
  double start_us = 0;
  double dur_us = 0;
  int micro_batch = -1;  // -1: not a micro-batch's
  int chunk = -1;
};

[[nodiscard]] std::vector<TraceEvent> step_trace_events(const StepReport& r);
[[nodiscard]] std::string step_trace_json(const StepReport& r);

}  // namespace coconet::step
