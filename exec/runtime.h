// The runtime's front door: measure a schedule on a backend (warm-up, then
// the median, min and max of `iters` steps, each step's time the slowest
// rank's, and each unit's share of it: the latest end of the unit less the
// latest end of the one before, on the ranks' common clock where they share
// one) and verify its outputs against the unscheduled program
// run on the same backend and, at small sizes, the reference interpreter.
// Every function here is collective: every rank of the job calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/verify.h"
#include "model/input_ranges.h"
#include "model/schedule.h"
#include "plan/step_plan.h"

namespace coconet::exec {

// Total elements (global, every rank) up to which the reference interpreter
// also checks a run: it simulates every rank in double precision in each
// process, so larger sizes cost seconds and gigabytes.
inline constexpr std::int64_t kDefaultInterpreterLimit = std::int64_t{1} << 21;

struct RunOptions {
  int iters = 10;
  int warmup = 2;
  std::uint64_t seed = 1;
  std::int64_t interpreter_limit = kDefaultInterpreterLimit;
  // Resolves each plan's collective choices before it runs (sim's
  // resolve_collectives on the run's topology, which `coconet run` passes
  // for the cuda backend); the backend then applies them call by call
  // (Backend::choose_collectives). Unset: plans run unresolved and the
  // backend makes its own choices.
  std::function<void(plan::StepPlan&)> resolve;
};

struct StageTime {
  std::string name;
  double median_us = 0.0;
};

struct RunRow {
  std::string workload;
  model::Bindings sizes;
  std::string schedule;
  int ranks = 1;
  double median_us = 0.0, min_us = 0.0, max_us = 0.0;
  std::vector<double> step_us;  // every timed step, the slowest rank's, in order
  std::vector<StageTime> stages;
  bool verified = true;
  double max_abs_error = 0.0;
  std::string mismatch;  // the first differing element when !verified
  std::string checked_against;  // "program", "program+interpreter"
  // Bytes of the program's values one step's backend calls read and wrote,
  // on the rank that touched the most (exec/bytes_touched.h).
  std::int64_t bytes_touched = 0;
};

// The expected outputs of a program at some sizes, this rank's parts.
struct References {
  // The ranges the inputs were drawn from (model/input_ranges.h, chosen for
  // the unscheduled program): every schedule's run draws the same.
  model::InputChoice inputs;
  Outputs program;                     // the unscheduled program on this backend
  std::optional<Outputs> interpreter;  // the reference interpreter, at small sizes
};

// The plan a backend runs for `schedule` (its knobs) at `sizes`: plan::lower
// with the backend's groups and capabilities. Groups must be set.
[[nodiscard]] plan::StepPlan lower_for(const Backend& backend, const model::Schedule& schedule,
                                       const model::Bindings& sizes);

// Runs the unscheduled program once (and the interpreter when small enough).
[[nodiscard]] References compute_references(Backend& backend, const model::Program& program,
                                            const model::Bindings& sizes, const RunOptions& options);

// Measures and verifies one schedule. Backend groups must be set (set_groups).
[[nodiscard]] RunRow run_schedule(Backend& backend, const model::Schedule& schedule, const model::Bindings& sizes,
                                  const References& refs, const RunOptions& options);

// A schedule whose slowest timed step took this many times its fastest ran
// on a machine that other work shares: on a quiet machine the steps of one
// schedule agree within tens of percent; on a loaded 2-core one the spread
// reached 2-3x (issue 31), where a median no longer describes the machine.
inline constexpr double kLoadedSpread = 2.0;

// The rows whose steps spread kLoadedSpread or more (max_us over min_us),
// and the one that spread most: what `run` warns of.
struct Spread {
  int rows = 0;
  const RunRow* worst = nullptr;
};
[[nodiscard]] Spread loaded_spread(const std::vector<RunRow>& rows);

// Throws UserError, before anything is allocated, when the program and these
// schedules do not fit in the memory of every rank.
void check_memory(Backend& backend, const model::Program& program, const std::vector<model::Schedule>& schedules,
                  const model::Bindings& sizes, const RunOptions& options);

}  // namespace coconet::exec
