// The statistics of a measurement protocol that decides: a distribution-free
// confidence interval for a schedule's median time (order statistics of its
// samples), the tie test between two schedules (their intervals overlap), the
// measured-best set of a point (every schedule tied with the fastest), and
// whether a point's intervals are narrow enough to call the verdict.
//
// Why order statistics and not a bootstrap: the interval of the median from
// the binomial distribution of "samples below the median" needs no resampling
// and no random numbers, holds for any distribution of times (step times are
// skewed: a descheduled rank adds a long tail) and states its own coverage.
// With fewer than 6 samples no pair of order statistics reaches 95%; the
// interval is then [min, max], whose coverage (1 - 2^(1-n)) is reported.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace coconet::validation {

// The confidence every interval of the report is computed at.
inline constexpr double kConfidence = 0.95;

// A point is decided when every schedule whose interval overlaps the fastest's
// (the fastest included) has an interval no wider than this fraction of its
// median: ties are then ties of close times, not of wide intervals. Measured
// on cpu-local (2 ranks, back-to-back runs, docs/validation.md): at 10%,
// schedules 1-3% apart (a fused op and its parts at N = 65536) stayed tied on
// 10-20 steps and swapped places from run to run, strict top-1 moving 6-33
// points between consecutive runs and worst regret up to 4.4%; at 1%, 6-28
// points and 0.43%; at 0.5%, 0-17 points and 0.18%, what still swaps being
// schedules within 0.2% of each other (validate: 10-15 s instead of 3 s).
inline constexpr double kDecisiveWidth = 0.005;

struct Interval {
  double lo = 0;
  double hi = 0;
  [[nodiscard]] bool overlaps(const Interval& o) const { return lo <= o.hi && o.lo <= hi; }
  [[nodiscard]] bool contains(double x) const { return lo <= x && x <= hi; }
};

struct MedianEstimate {
  double median = 0;
  Interval ci;
  double coverage = 0;  // the interval's exact coverage for a continuous distribution
  int samples = 0;
  // (hi - lo) / median; 0 for a zero median.
  [[nodiscard]] double relative_width() const;
};

// The median of `samples` with a confidence interval at `confidence` (or the
// widest available, [min, max], when there are too few samples). Empty input
// is an InternalError.
[[nodiscard]] MedianEstimate median_interval(std::span<const double> samples, double confidence = kConfidence);

// Two schedules are statistically indistinguishable when their medians'
// intervals overlap (a conservative test: two overlapping 95% intervals do not
// prove equality, they fail to prove a difference).
[[nodiscard]] bool indistinguishable(const MedianEstimate& a, const MedianEstimate& b);

// Indices of the estimates tied with the fastest median (the fastest first,
// then in input order). Empty input: empty.
[[nodiscard]] std::vector<std::size_t> measured_best_set(std::span<const MedianEstimate> estimates);

// Whether the estimates decide the point (kDecisiveWidth above), the
// schedule the model picked (`pick`, an index) included: its regret is read
// from its median, so a pick that lost to a slow round must not be judged on
// a wide interval.
[[nodiscard]] bool decided(std::span<const MedianEstimate> estimates, std::size_t pick,
                           double max_relative_width = kDecisiveWidth);

}  // namespace coconet::validation
