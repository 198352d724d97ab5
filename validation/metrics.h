// How well predictions match measurements: per-row error, MAPE and the worst
// error over all rows; per (workload, size) point the Spearman rank correlation
// of predicted and measured times over its schedules, whether the predicted
// best is the measured best (top-1), and the regret of trusting the prediction
// (measured time of the predicted best over the measured best, minus one).
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
  bool top1 = false;
  double regret_pct = 0;                 // 0 when top1
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
  double top1_agreement = 0;  // fraction of points whose predicted best is the measured best
  double regret_pct = 0;      // the largest regret over the points (0 when all agree)
  double mean_regret_pct = 0; // mean regret over the points where they disagree (0 when none)
  std::vector<PointMetrics> per_point;
};

// Metrics of the rows; rows with a non-positive measured time are an InternalError.
[[nodiscard]] Metrics compute_metrics(std::span<const ResultRow> rows);

// The rows of one point, in input order.
[[nodiscard]] std::vector<ResultRow> rows_of(std::span<const ResultRow> rows, const PointKey& key);
// The points in first-appearance order.
[[nodiscard]] std::vector<PointKey> points_of(std::span<const ResultRow> rows);

}  // namespace coconet::validation
