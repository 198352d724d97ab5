// The order in which each pipeline stage runs its micro-batches' forward and
// backward passes under GPipe, 1F1B and interleaved 1F1B (Narayanan et al.,
// SC'21, section 2; the warm-up counts and chunk order of Megatron-LM's
// schedules), and their layout in time: every op at the earliest time its
// stage is free and its input has arrived, each virtual stage's forward and
// backward taking their own times (uneven stages: the embedding on the first,
// the output layer and loss on the last, layer counts that differ). The
// layout is the step's only source of the pipeline's span, so of its bubble
// (step/compose.h). With every chunk alike it spans m v + pp - 1 chunk steps:
// (pp - 1) / v of a micro-batch's forward and backward beyond m of them, the
// closed form of Narayanan et al. SC'21 section 2.2 (a test holds the two equal).
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

// Forward chunks a stage runs before its first backward (Megatron-LM's
// warm-up: m v under GPipe, pp - stage - 1 under 1F1B, (pp - stage - 1) x 2 +
// (v - 1) x pp interleaved, at most m v), plus the one whose backward follows:
// the chunks whose activations the stage holds at its peak.
[[nodiscard]] int chunks_in_flight(PipeSchedule s, int pp, int virtual_stages, int micro_batches, int stage);

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
// The same with each virtual stage's own times: fwd_us[k], bwd_us[k] for
// virtual stage k = chunk x pp + stage (pp x virtual_stages entries).
[[nodiscard]] std::vector<PlacedOp> lay_out(const std::vector<std::vector<PipeOp>>& orders, int virtual_stages,
                                            int micro_batches, const std::vector<double>& fwd_us,
                                            const std::vector<double>& bwd_us);
// When the last op ends, without keeping the ops (what the composition needs).
[[nodiscard]] double span_us(const std::vector<std::vector<PipeOp>>& orders, int virtual_stages, int micro_batches,
                             const std::vector<double>& fwd_us, const std::vector<double>& bwd_us);

// A lower bound of span_us for any of the schedules, from the times alone:
// stage s runs all its ops (m of each of its chunks' forward and backward)
// after micro-batch 0's forward has passed virtual stages 0 .. s - 1 and
// before the last backward passes them back. The largest over the stages; it
// equals the span when every virtual stage takes the same times (the closed
// form above), and a search uses it to skip laying out a layout that cannot win.
[[nodiscard]] double span_lower_bound_us(int pp, int virtual_stages, int micro_batches, const std::vector<double>& fwd_us,
                                         const std::vector<double>& bwd_us);

}  // namespace coconet::step
