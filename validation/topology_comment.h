// The comment lines `calibrate` ends a topology YAML with (the calibrated
// range, the reference times): one line each, a fixed prefix, then
// "key=value" pairs of numbers. The topology's keys are the cost model's
// alone, so what a calibration records for validate lives in comments.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace coconet::validation {

// The pairs of the first line of `text` that starts with `prefix`; empty when
// no line does. A pair whose value is not a number is left out (a damaged
// comment checks less, it does not fail the run).
[[nodiscard]] std::optional<std::map<std::string, double>> comment_fields(const std::string& text,
                                                                          const std::string& prefix);

}  // namespace coconet::validation
