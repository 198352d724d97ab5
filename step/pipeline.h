// The order in which each pipeline stage runs its micro-batches' forward and
// backward passes under GPipe, 1F1B and interleaved 1F1B (Narayanan et al.,
// SC'21, section 2; the warm-up counts and chunk order of Megatron-LM's
// schedules), and their layout in time when every forward chunk takes the same
// time on every stage and so does every backward chunk: the composition's
// assumption (every stage priced as the slowest), under which the layout spans
// (m v + pp - 1) chunk steps, the composition's m (F + B) + (pp - 1) / v (F + B).
#pragma once

#include <vector>

#include "step/spec.h"

namespace coconet::step {

enum class Pass { forward, backward };

struct PipeOp {
  Pass pass = Pass::forward;
  int micro_batch = 0;
  int chunk = 0;  // model chunk of the stage (0 .. virtual stages - 1): virtual stage chunk x pp + stage
};

// Each stage's ops in the order it runs them (pp lists of 2 m v ops).
[[nodiscard]] std::vector<std::vector<PipeOp>> stage_orders(PipeSchedule s, int pp, int virtual_stages,
                                                            int micro_batches);

struct PlacedOp {
  PipeOp op;
  int stage = 0;
  double start_us = 0;
  double end_us = 0;
};

// Every op at the earliest time its stage is free and its input has arrived
// (the previous virtual stage's forward, the next one's backward), each
// forward taking `fwd_us`, each backward `bwd_us`. Ops in start order per stage.
[[nodiscard]] std::vector<PlacedOp> lay_out(const std::vector<std::vector<PipeOp>>& orders, int virtual_stages,
                                            int micro_batches, double fwd_us, double bwd_us);

}  // namespace coconet::step
