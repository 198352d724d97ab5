// The data a validation produces: one row per (workload, size, schedule) with
// the predicted time next to the measured one, and everything a report needs
// besides (what ran where, the inputs to repeat it, the simulator's timeline).
// Plain values, shared by the metrics, the report writers and the CLI.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "validation/stats.h"

namespace coconet::validation {

// A measured time: median, fastest and slowest of the timed iterations, and
// the median's confidence interval (validation/stats.h) over `samples` steps.
struct Measurement {
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  double ci_lo_us = 0;  // both 0 with no samples recorded (a published figure): the median alone
  double ci_hi_us = 0;
  int samples = 0;
  // The median with its interval; [median, median] when no interval was recorded.
  [[nodiscard]] MedianEstimate estimate() const;
};

// One unit of a schedule's plan (a stage, or an overlap group): the simulator's
// time for it next to the executor's (the median over rounds of the per-round
// median of the unit's share of the step: the latest end of the unit less the
// latest end of the unit before, exec/runtime.h).
struct StageRow {
  std::string name;  // "AR", "fuse(RS-C-AG)", "ol(MM,AR)"
  double predicted_us = 0;
  double measured_us = 0;
};

struct ResultRow {
  std::string workload;
  std::string size;        // the point's sizes as text, e.g. "N=1048576" or "B=8,S=1024"
  double scale = 0;        // the point's position on a size axis (the product of its sizes)
  std::string schedule;    // canonical name, e.g. "fuse(RS-C-AG)"
  bool baseline = false;   // the unscheduled program (what speed-ups are measured against)
  double predicted_us = 0;
  std::size_t schedule_stages = 0;  // the schedule's stages: the tie-break between equal predictions (model::predicted_best)
  Measurement measured;
  bool verified = false;   // the run's result matched the reference (always true for references)
  std::string source;      // where a published measurement comes from (reference rows only)
  std::vector<StageRow> stages;  // per unit of the plan (validate rows only)
  int rounds = 0;                // rounds over the point's schedules that measured it (validate rows only)
  std::vector<double> round_medians_us;  // the median step of each round, in round order (validate rows only)
  // The point guard (validation/spell_guard.h; validate rows only): the
  // slower probe around the kept measurement over the guard's baseline (0:
  // no guard), and how many measurements of the point a slow spell discarded.
  double probe_ratio = 0;
  int measured_again = 0;
  bool in_spell = false;  // kept from a slow spell: its probe past the guard's tolerance
  std::string outside_calibration;  // the ops past the calibrated range, "; "-separated (empty: inside, or unchecked)

  // Signed relative error of the prediction, in percent: (predicted - measured) / measured.
  [[nodiscard]] double error_pct() const;
};

// A (workload, size) point: the rows that compete for "best schedule".
struct PointKey {
  std::string workload;
  std::string size;
  friend auto operator<=>(const PointKey&, const PointKey&) = default;
};

// One bar of the simulator's timeline (a Chrome trace "X" event).
struct TimelineBar {
  std::string lane;   // "rank 0 / compute", ...
  std::string name;   // the task, e.g. "AR chunk 1/4"
  double start_us = 0;
  double duration_us = 0;
};

// A reference microbenchmark measured by validate against its calibration
// (validation/machine_speed.h): how far the machine's speed moved.
struct SpeedCheck {
  std::string label;  // "add f32 N=65536"
  double calibrated_us = 0;
  double start_us = 0;  // before the points
  double end_us = 0;    // after them
  // How far the machine moved for the whole validation: the smaller relative
  // move of the two when both go the same way (0.3: 30% slower, or faster,
  // before and after the points); 0 when they go opposite ways. A spell at
  // one end alone is not the validation's machine.
  [[nodiscard]] double drift() const {
    const double a = start_us / calibrated_us - 1.0, b = end_us / calibrated_us - 1.0;
    return (a > 0) == (b > 0) ? std::min(std::abs(a), std::abs(b)) : 0.0;
  }
};

// Everything a report shows, besides what the metrics compute from the rows.
struct ReportData {
  std::string title;                    // e.g. "cpu-local on cpu, 4 ranks"
  std::string backend;                  // "cpu", "cuda", or "reference"
  std::string topology;                 // the topology's name
  int ranks = 0;
  std::string command;                  // the command line that regenerates it
  std::vector<std::string> notes;       // free text shown under the summary (sources, caveats)
  std::vector<std::string> warnings;    // what makes the numbers less trustworthy (oversubscription, sizes past calibration)
  std::vector<ResultRow> rows;
  std::string timeline_title;           // which schedule the timeline shows
  std::vector<TimelineBar> timeline;
  std::string trace_json;               // the simulator's Chrome trace of that schedule
  std::string measured_timeline_title;  // the same schedule, run with a launch recorder
  std::vector<TimelineBar> measured_timeline;
  std::string measured_trace_json;      // its Chrome trace (trace-measured.json); empty: none (a reference report)
  std::map<std::string, std::string> inputs;  // file name under inputs/ -> YAML text
  std::vector<SpeedCheck> speed;              // the machine against its calibration (empty: not compared)
};

}  // namespace coconet::validation
