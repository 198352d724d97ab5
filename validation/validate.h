// The validation loop: predict -> pick -> execute -> compare. For every
// workload and size point of an experiment, every enumerated schedule is
// predicted on the topology (given, or calibrated on the spot) by the tuner's
// event simulation, then run and verified on the backend with the knobs the
// prediction chose; the rows, the metrics, the simulated timeline of the best
// schedule and the inputs that repeat the run (workloads, experiment,
// topology, schedules with knobs, command line, commit, machine and its load)
// make up the report.
#pragma once

#include <optional>
#include <string>

#include "exec/backend.h"
#include "model/set_flag.h"
#include "validation/metrics.h"
#include "validation/microbench.h"
#include "validation/progress.h"
#include "validation/results.h"

namespace coconet::validation {

// The experiment `validate` runs when none is named.
inline constexpr const char* kDefaultExperiment = "cpu-local";

// Seconds `validate` may spend, over the whole run, on extra rounds for points
// whose intervals are too wide to decide (validation/stats.h): about a third
// of what cpu-local's base rounds take on a 2-core machine.
inline constexpr double kDefaultBudgetS = 60.0;

// Seconds `validate` may spend, over the whole run, waiting out the shared
// host's slow spells and measuring points again after them (spell_guard.h),
// first come first served. Spells last seconds to minutes here: a share per
// point of the budget (60 s over 21 points) waited out none longer than
// about 3 s; 60 s for the run ran out in 5 of 13 runs on cpu-local (MAPE
// 10.0-37.9% against 6.8-11.5% in the others); 180 s waited out a 129 s
// spell and flagged no point in 4 runs (2026-12-01, docs/validation.md).
inline constexpr double kDefaultWaitS = 180.0;

struct ValidateOptions {
  std::string experiment = kDefaultExperiment;  // a name in configs/experiments/ or a path
  std::optional<std::string> topology;          // a name or path; none: calibrate now
  std::string command;                          // the command line, shown in the report
  std::string commit;                           // the build's source commit, recorded in inputs/commit.txt
  std::optional<int> iters;                     // instead of the experiment's
  std::optional<int> warmup;
  model::Assignments sets;                      // --set sizes and scalars (model/set_flag.h rules)
  MicroOptions calibration{5, 1, true};         // when calibrating on the spot: the quick sweep
  double budget_s = kDefaultBudgetS;            // time for extra rounds on undecided points, whole run
  double wait_s = kDefaultWaitS;                // time to wait out slow spells, whole run
  // A topology calibrated on another machine (validation/machine_identity.h)
  // is calibrated again on this one first, into the user's cache folder (the
  // quick sweep, with the experiment's sizes; reused while this machine stays
  // the same), and that calibration predicts. False (--no-calibrate): the
  // topology predicts as it is, with the warning.
  bool calibrate_other_machine = true;
};

struct Validation {
  ReportData report;
  Metrics metrics;
  int unverified = 0;  // rows whose result did not match the reference
};

// Checks what can be checked before any rank starts (the experiment, its
// workloads and points on `world_size` ranks, the topology): throws UserError
// with the fix.
void check_validate_inputs(const ValidateOptions& o, int world_size);

// Runs the loop on `backend`: collective, every rank calls it and gets the
// same result.
[[nodiscard]] Validation run_validation(exec::Backend& backend, const ValidateOptions& o, Progress& progress);

}  // namespace coconet::validation
