// `coconet step` as a request and its outcome, and the outcome as the JSON
// `step --format json` prints: the one place the command, `coconet compare
// MODEL` and the Python module (python/) price steps and build their results.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/topology.h"
#include "step/compose.h"
#include "step/layer_block.h"
#include "step/spec.h"

namespace coconet::cli {

inline constexpr double kUsPerMs = 1e3;

struct StepRequest {
  std::string model;                 // a name of models/ or a file
  std::string topology = "dgx-h100";
  std::optional<int> nodes;          // default: the topology's
  std::vector<std::string> sets;     // SECTION.KEY=VALUE: the model's (model, training, parallel, pipeline) or the topology's
  bool search = false;
  bool search_tp_overlap = false;
  int top = 5;
  // The search's progress (step::SearchOptions::progress): the command draws
  // it on stderr; empty elsewhere (compare, the Python module).
  std::function<void(int done, int total, const std::string& what)> search_progress;
};

struct StepOutcome {
  step::ModelSpec spec;
  sim::Topology topology;
  std::vector<step::StepReport> reports;  // the priced layout, or the search's best first
  bool search = false;
  int evaluated = 1;  // layouts sized
  int over_memory = 0;
  int laid_out = 1;
};

// Prices the request's step, or searches its layouts; a UserError when the
// search finds none that fits (naming why).
[[nodiscard]] StepOutcome run_step(const StepRequest& r);

// The kernel choices of a report's layer (step/layer_block.h): its layer
// priced again by `layers`, which holds it already when it priced the step.
[[nodiscard]] step::KernelChoices kernels_of(const step::StepReport& r, step::LayerBlockPricer& layers);
[[nodiscard]] std::string kernels_label(const step::KernelChoices& k);

// "dp 8 x tp 8 x pp 4, interleaved v5, ...": a layout on one line.
[[nodiscard]] std::string layout_label(const step::StepReport& r);

// One layout as `step --format json` lists it.
[[nodiscard]] nlohmann::json layout_json(const step::StepReport& r, const step::KernelChoices& k);
// The whole `step --format json` body, tagged "step".
[[nodiscard]] nlohmann::json step_json(const StepOutcome& o);

// `coconet compare MODEL`: the step on each side (each topology at each node
// count; with search, each side's best layout), the first the reference.
struct StepSide {
  std::string name;  // "dgx-h100", or "dgx-h100 x32" when several node counts are given
  StepOutcome outcome;
};
[[nodiscard]] std::vector<StepSide> compare_steps(const StepRequest& base, const std::vector<std::string>& topologies,
                                                  const std::vector<int>& nodes);
// A sentence when the sides' GPU counts differ (empty when they agree).
[[nodiscard]] std::string gpu_count_note(const std::vector<StepSide>& sides);
// Tagged "compare_steps": each side's step time, its ratio to the reference,
// tokens per second, model TFLOP/s per GPU, MFU and memory.
[[nodiscard]] nlohmann::json compare_steps_json(const std::vector<StepSide>& sides);

}  // namespace coconet::cli
