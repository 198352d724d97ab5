// The parallel layout search of `coconet step --search`: every tp (powers of
// two up to a node, dividing the heads), cp (powers of two, 2 cp dividing the
// sequence; ring and all-gather K/V when above 1), pp (up to the layers, tp x
// cp x pp dividing the GPUs; stages balanced as step/spec.h's
// balanced_stage_layers), dp (the GPUs left), micro-batch (powers of two dividing
// the batch per pipeline), pipeline schedule (GPipe, 1F1B, interleaved with 2
// or 4 virtual stages when pp > 1), ZeRO stage (0-3), recomputation (none,
// selective, full) and sequence parallelism (on and off when tp > 1); with
// experts, ep (powers of two dividing the experts) and etp (powers of two
// dividing tp and the expert ffn) whose ep x etp divides tp x cp x dp, and
// the MoE overlaps each layout allows turned on; layouts
// that do not fit in the GPUs' memory are dropped before they are priced
// (memory is a formula of the layout, time needs the tuner); the rest ranked by step
// time, exactly: each is priced with its pipeline's span bounded below, and
// only those whose bound can still beat the layouts kept are laid out
// (search.cpp). The layers and data-parallel blocks the tuner prices are
// cached across layouts.
#pragma once

#include <vector>

#include "sim/topology.h"
#include "step/compose.h"
#include "step/spec.h"

namespace coconet::step {

struct SearchOptions {
  int keep = 5;                  // layouts returned
  int max_micro_batch = 16;
  bool vary_micro_batch = true;  // false: the spec's micro-batch only
  bool vary_tp = true;           // false: the spec's tp only
  bool vary_cp = true;           // false: the spec's cp (and cp_comm) only
  int max_cp = 16;
  bool vary_pp = true;
  bool vary_schedule = true;
  bool vary_zero = true;         // false: the spec's ZeRO stage only
  bool vary_recompute = true;
  bool vary_sequence_parallel = true;
  bool vary_ep = true;           // false: the spec's ep and etp only (a model with experts)
  bool vary_tp_overlap = false;  // true: tp_overlap both ways (an overlapped layer tunes every schedule: slower)
  // A model with experts: each layout with the MoE overlaps it allows on
  // (moe.a2a_overlap with a 1F1B schedule, moe.shared_expert_overlap with
  // shared experts: in the model neither is ever slower, search.cpp); false:
  // the file's.
  bool vary_moe_overlap = true;
  // The GEMMs' precision: a bf16 or fp8 model also tries the other where the
  // GPU states an FP8 rate (gpu.tflops.fp8); false: the model's only.
  bool vary_precision = true;
  // Told as the search goes (a command's progress line): `done` of `total`
  // (tp, cp) pairs sized and priced, with `what` naming the pair begun; then
  // once with done == total before the candidates that can still win are
  // laid out. Empty: nothing is told.
  std::function<void(int done, int total, const std::string& what)> progress;
};

struct SearchResult {
  std::vector<StepReport> best;  // fastest first, every one fits in memory
  int evaluated = 0;             // layouts sized (and priced when they fit)
  int over_memory = 0;           // of them, how many did not fit (not priced)
  int priced = 0;                // of them, how many fit: priced with the pipeline bounded
  int laid_out = 0;              // of those, how many were laid out (the rest could not win)
  // Layouts ruled out before pricing: a size that does not divide another
  // (tp and the heads, K/V heads or GPUs; the global batch and micro-batch x
  // dp; interleaving and the micro-batches...), with the first such reason.
  int indivisible = 0;
  std::string indivisible_example;
  int tuned_blocks = 0;          // distinct data-parallel blocks the tuner priced
  int tuned_layers = 0;          // distinct layer shapes whose programs the tuner priced
};

// Why nothing fits, for a message: the counts of layouts ruled out by
// divisibility and by memory, with an example of the first.
[[nodiscard]] std::string why_none_fits(const SearchResult& r, const sim::Topology& t);

[[nodiscard]] SearchResult search_layouts(const ModelSpec& base, const sim::Topology& t,
                                          const SearchOptions& o = {});

}  // namespace coconet::step
