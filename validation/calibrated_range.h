// The sizes a calibration measured, and the ops of a plan that lie past them.
// A fitted constant is trustworthy only over the sizes it was fitted on (on a
// small CPU, times jump past the last-level cache and the scheduler's time
// slice: docs/validation.md), so `calibrate` records the largest element-wise
// bytes, collective bytes and GEMM FLOPs it ran as one comment line of the
// topology YAML (the topology's keys are the cost model's alone), and
// `validate` flags every point with an op beyond them in its report.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/step_plan.h"
#include "validation/microbench.h"

namespace coconet::validation {

// The comment's prefix in a topology YAML.
inline constexpr const char* kRangeComment = "# coconet-calibrated-range:";

// The largest work of each kind the calibration measured (0: none measured).
struct CalibratedRange {
  double elementwise_bytes = 0;
  double collective_bytes = 0;  // nccl-tests size, as plan::Collective::bytes
  double gemm_flops = 0;
};

[[nodiscard]] CalibratedRange range_of(const std::vector<MicroSample>& samples);

// The comment line (with its newline) that records `r`.
[[nodiscard]] std::string range_comment(const CalibratedRange& r);

// The range recorded in a topology YAML's text; empty when it has none (a
// hand-written topology, or one calibrated before the line existed).
[[nodiscard]] std::optional<CalibratedRange> parse_range(const std::string& topology_text);

// Each op of `plan` whose work exceeds the range, described for a reader
// ("AR: 524288 collective bytes > 262144 calibrated"); a kind with no
// calibrated size is not checked.
[[nodiscard]] std::vector<std::string> beyond_range(const plan::StepPlan& plan, const CalibratedRange& r);

}  // namespace coconet::validation
