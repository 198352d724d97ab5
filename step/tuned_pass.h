// A pass (a layer's or an MoE layer's forward or backward) taken from the
// tuner's ranking of its program's schedules, one rule for both pricers:
// on a group of one rank no collective runs, so every candidate costs its
// computation alone and the cheapest is taken; otherwise the tuner's best is
// taken, with the compute stages that ran beside a collective counted as
// hidden (scaled down to the pass's time), not twice.
#pragma once

#include <optional>
#include <vector>

#include "model/error.h"
#include "sim/tuner.h"

namespace coconet::step {

// `of(c)` builds a Pass (time_us, gemm_us, elementwise_us, ...) from a
// candidate; `scale(p, f)` multiplies its compute parts by f.
template <typename Pass, typename Of, typename Scale>
Pass tuned_pass(const std::vector<sim::Candidate>& ranked, bool one_rank, Of of, Scale scale) {
  if (ranked.empty()) throw InternalError("tuned_pass: the tuner ranked no schedule");
  if (one_rank) {
    std::optional<Pass> best;
    for (const sim::Candidate& c : ranked) {
      Pass p = of(c);
      p.time_us = p.gemm_us + p.elementwise_us;
      if (!best || p.time_us < best->time_us) best = p;
    }
    return *best;
  }
  Pass p = of(ranked.front());
  const double compute = p.gemm_us + p.elementwise_us;
  if (compute > p.time_us && compute > 0) scale(p, p.time_us / compute);
  return p;
}

}  // namespace coconet::step
