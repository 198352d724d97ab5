// The measured timeline: one step of a schedule run with a launch recorder
// (exec/launch_recorder.h) on every rank, the records gathered to every rank,
// and written as a Chrome trace (trace-measured.json: one process per rank,
// one thread per stream, like the simulator's trace.json) that the report
// draws next to the predicted Gantt chart.
#pragma once

#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/launch_recorder.h"
#include "exec/runtime.h"
#include "model/schedule.h"
#include "plan/step_plan.h"

namespace coconet::validation {

// The Chrome trace of per-rank records (index = world rank), each rank's times
// relative to its own step start (`step_start_us[rank]`).
[[nodiscard]] std::string measured_trace_json(const plan::StepPlan& plan,
                                              const std::vector<std::vector<exec::LaunchRecord>>& per_rank,
                                              const std::vector<double>& step_start_us, const std::string& title);

// Runs `schedule` at `sizes` for the warm-up steps and one recorded step
// (collective: every rank calls it, backend groups set) and returns the trace
// on every rank.
[[nodiscard]] std::string record_measured_trace(exec::Backend& backend, const model::Schedule& schedule,
                                                const model::Bindings& sizes, const exec::RunOptions& options,
                                                const std::string& title);

}  // namespace coconet::validation
