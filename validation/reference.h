// `validate --reference`: the cost model against every published figure in
// validation/reference/ (nccl-tests bus bandwidths, a small-message latency,
// the CoCoNet paper's speed-ups, Megatron-LM's whole-step TFLOP/s per GPU), each shown with its source, as a report of
// the same kind as a measured validation.
//
// How a figure becomes a row: a bus bandwidth B at a large message of S bytes
// is the time S x bus_factor / B, next to the model's time for the same
// collective; a latency is a time already; a published speed-up range
// [lo, hi] of the best schedule over the baseline becomes the time the
// baseline would take divided by it (median at the range's middle, min and
// max at its ends), so the row's error is the model's speed-up against it.
#pragma once

#include <string>

#include "validation/metrics.h"
#include "validation/results.h"

namespace coconet::validation {

// The reference folder: <data root>/validation/reference.
[[nodiscard]] std::string reference_dir();

struct ReferenceValidation {
  ReportData report;
  Metrics metrics;
  std::vector<std::string> skipped;  // figures with no counterpart in the model, and why
};

// Reads every *.yaml in `dir` (default: reference_dir()) and compares.
[[nodiscard]] ReferenceValidation validate_reference(const std::string& dir, const std::string& command);

}  // namespace coconet::validation
