// A step's time and each unit's share of it, from every rank's unit times.
// The step is the slowest rank's end of its last unit, each rank counting
// from its own start. A unit's share is the latest end of the unit less the
// latest end of the unit before, on the ranks' common clock where they share
// one (the first unit takes the rest of the step: the ranks leave the
// barrier apart), else on each rank's own count from its start. So a rank
// that waits in a collective for a slower rank's previous unit charges that
// wait to the unit that made it, and the shares add up to the step. Counted
// from their own starts alone, a rank that left the barrier late and then
// computed longer than the others put the smaller of the two delays in the
// collective after the computation (tests/mpi: a 200 ms late start and a
// 200 ms slower update gave the all-gather after the update 200 ms).
//
// Split in two around the one collective it needs (a max over ranks), so
// that the arithmetic is tested without ranks: every rank contributes
// step_share_terms(), the runtime reduces them with max, and step_shares()
// reads the reduced terms.
#pragma once

#include <cstddef>
#include <vector>

namespace coconet::exec {

struct StepShares {
  double step = 0;
  std::vector<double> units;
};

// This rank's terms: its units' cumulative ends (from its own start), then,
// where `clock_shared`, the same on the common clock (`start_us` added).
[[nodiscard]] std::vector<double> step_share_terms(std::vector<double> unit_us, double start_us, bool clock_shared);

// The step and its shares from the terms reduced with max over the ranks,
// for `units` units.
[[nodiscard]] StepShares step_shares(const std::vector<double>& reduced, std::size_t units, bool clock_shared);

}  // namespace coconet::exec
