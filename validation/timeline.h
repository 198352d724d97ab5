// Reads a Chrome trace (the simulator's trace.json: complete "X" events plus
// process_name / thread_name metadata) into timeline bars for the report's
// Gantt chart. Lanes are named "<process> / <thread>" in order of appearance.
#pragma once

#include <string>
#include <vector>

#include "validation/results.h"

namespace coconet::validation {

// Throws UserError when the text is not a Chrome trace (object with
// "traceEvents", or a bare array of events).
[[nodiscard]] std::vector<TimelineBar> timeline_from_trace(const std::string& trace_json);

}  // namespace coconet::validation
