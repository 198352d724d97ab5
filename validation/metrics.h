// How well predictions match measurements: per-row error, MAPE and the worst
// error over all rows; per (workload, size) point the Spearman rank correlation
// of predicted and measured times over its schedules, whether the predicted
// best is the measured best (top-1, strict: the pick itself has the fastest
// median), whether the fastest median is the pick's or a schedule's priced
// alike with it (ties on the predicted side counted), whether the pick
// is inside the measured-best set (the schedules statistically tied with the
// fastest, validation/stats.h), and the regret of trusting the prediction
// (measured time of the predicted best over the measured best, minus one).
// Regret and MAPE carry intervals propagated from the medians' intervals: the
// smallest and largest value they take with every median inside its interval.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "validation/results.h"

namespace coconet::validation {

// Spearman's rank correlation of two equally long series (ties get their
// average rank). Empty when fewer than two values or when either series is
// constant (the correlation is undefined then).
[[nodiscard]] std::optional<double> spearman(std::span<const double> a, std::span<const double> b);

// Average ranks (1-based) of the values, ties sharing the mean of their ranks.
[[nodiscard]] std::vector<double> average_ranks(std::span<const double> v);

struct PointMetrics {
  PointKey key;
  int schedules = 0;
  std::string predicted_best;
  std::string measured_best;
  std::vector<std::string> predicted_best_set;  // the predicted best and every schedule predicted alike with it (model::kPredictedAlike)
  bool fastest_in_predicted_set = false;  // a schedule of predicted_best_set has the fastest median (predicted ties counted)
  bool top1_strict = false;             // top-1, strict: the predicted best itself has the fastest median
  std::vector<std::string> measured_best_set;  // the fastest first, then every schedule tied with it
  bool top1_in_set = false;              // the predicted best is in measured_best_set
  bool decided = true;                   // the tied schedules' and the pick's intervals are narrow (stats.h decided())
  double regret_pct = 0;                 // of the predicted best: 0 when top1_strict
  Interval regret_ci;                    // regret with the pick's and the best's medians in their intervals
  std::optional<double> spearman;
  double mape_pct = 0;
  double speedup_predicted = 1;          // baseline / predicted best, both predicted
  double speedup_measured = 1;           // baseline / measured best, both measured
  double speedup_of_pick_measured = 1;   // baseline / the predicted best, both measured
};

struct Metrics {
  int rows = 0;
  int points = 0;
  double mape_pct = 0;        // mean |error| over rows
  double max_error_pct = 0;   // largest |error| over rows
  std::optional<double> spearman;  // mean over the points where it is defined
  Interval mape_ci;           // MAPE with every median in its interval
  double fastest_in_predicted_set = 0;  // fraction of points whose predicted-best set holds the fastest median
  double top1_strict = 0;     // top-1, strict: fraction of points whose predicted best itself is the measured best
  double top1_in_set = 0;     // fraction of points whose predicted best is in the measured-best set
  int undecided_points = 0;   // points whose intervals stayed too wide to decide (stats.h decided())
  double regret_pct = 0;      // the largest regret over the points (0 when all agree)
  Interval regret_ci;         // the largest regret's interval: max of the points' bounds
  double mean_regret_pct = 0; // mean regret over the points where they disagree (0 when none)
  std::vector<PointMetrics> per_point;
};

// "PICK" or, where others are predicted alike, "PICK (alike: A, B)".
[[nodiscard]] std::string predicted_text(const PointMetrics& p);

// Metrics of the rows; rows with a non-positive measured time are an InternalError.
[[nodiscard]] Metrics compute_metrics(std::span<const ResultRow> rows);

// The metrics of the points not kept from a slow spell (ResultRow::in_spell),
// where some were and some were not: what the model scored on the machine as
// calibrated, beside the metrics of every point. None otherwise.
[[nodiscard]] std::optional<Metrics> metrics_outside_spells(std::span<const ResultRow> rows);

// The rows of one point, in input order.
[[nodiscard]] std::vector<ResultRow> rows_of(std::span<const ResultRow> rows, const PointKey& key);
// The points in first-appearance order.
[[nodiscard]] std::vector<PointKey> points_of(std::span<const ResultRow> rows);

}  // namespace coconet::validation
