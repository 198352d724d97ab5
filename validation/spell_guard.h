// The spell guard: how validate and calibrate keep the shared host's slow
// spells out of what they measure. It probes a reference microbenchmark
// before and after a measurement (a validation's point, a calibration's
// sweep); in a spell it waits before measuring, and it measures again when a
// probe around the measurement shows one, while a time allowance lasts. The
// decisions are kept apart from what is probed and measured (given as
// SpellActions), so that the waits and the measuring again can be tested
// with spells that end on cue.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "validation/machine_speed.h"
#include "validation/progress.h"

namespace coconet::validation {

// A slow spell of the shared host lasts seconds to minutes and slows
// element-wise work 1.3-2x; the checks before and after all of validate's
// points miss one that falls in the middle, and the points it covers measure
// that much over their predictions. So the guard times the memory reference
// (20 steps, a few ms) around each measurement. Measured here (2 ranks, 2
// cores, 2026-12-01, one calibration): the probes ran 0.80-1.03x the
// baseline outside spells and 1.29-1.85x in them, where the points measured
// 25-36% over their predictions (a validation's MAPE 20.1% against 6.2-7.8%);
// at 35% the guard let the spell's 1.29-1.34x points through. Measured
// against a calibration made in a faster spell, quiet runs probed up to 1.34x:
// there the guard flags what is in truth a calibration to redo.
inline constexpr const char* kGuardReference = "memory";
inline constexpr double kGuardTolerance = 0.2;
// Measurements after the first, at most.
inline constexpr int kGuardRetries = 2;
// Seconds between the probes while a spell lasts (the wait is the allowance's).
inline constexpr double kGuardPollS = 0.5;

// The baseline of the guard's probes: the faster of the calibrated time and
// the first check of the reference now (a run that starts in a spell keeps
// the calibration's, one calibrated in a spell the run's); 0 when neither is known.
[[nodiscard]] double guard_baseline_us(const CalibratedSpeed& calibrated, const std::map<std::string, double>& now);

// Whether a probe of `probe_us` against `baseline_us` shows a slow spell.
[[nodiscard]] bool slow_spell(double probe_us, double baseline_us);

// One measurement, as the guard sees it.
struct MeasureSeconds {
  double total_s = 0;       // its time (a measurement again is the allowance's)
  double reference_us = 0;  // the reference as the measurement itself timed it (a calibration's sweep); 0: not timed
};

// What the guard probes and measures. Every rank calls each the same number
// of times (agree keeps their decisions one).
struct SpellActions {
  std::function<double()> probe;  // the reference's time now (us); 0: no guard
  std::function<bool(bool)> agree;  // rank 0's answer, on every rank
  std::function<void(double seconds)> wait;
  // Measures (what it measured stays with the caller; the last one is kept).
  std::function<MeasureSeconds()> measure;
  std::function<void(const std::string&)> note;  // what happens now (progress)
};

struct SpellOutcome {
  double probe_ratio = 0;  // the kept measurement's slowest probe over the baseline; 0 without a guard
  int measured_again = 0;  // measurements a spell discarded
  double spent_s = 0;      // of the allowance: the waits and the measurements again
};

// Measures once, or more around slow spells: waits (probing every
// kGuardPollS) while a probe is more than kGuardTolerance over `baseline_us`,
// and measures again (kGuardRetries at most) when one before or after the
// measurement was (or the measurement's own time of the reference), while
// `allowance_s` lasts; what it cannot wait out is kept, and its probe_ratio
// says so. No baseline (0): one measurement.
[[nodiscard]] SpellOutcome guard_measurement(const SpellActions& a, double baseline_us, double allowance_s);

// Rank 0's answer on every rank: the clocks differ, the decisions must not.
[[nodiscard]] bool rank0_says(exec::Backend& backend, bool yes);

// The actions on a backend, all but measure: the probe runs `probe_samples`
// (speed_samples(world, {kGuardReference}); none: no guard) with the
// calibration's protocol; notes go to `progress`, after `what`.
[[nodiscard]] SpellActions spell_actions(exec::Backend& backend, std::vector<MicroSample> probe_samples,
                                         Progress& progress, std::string what);

}  // namespace coconet::validation
