// Per-operation collective constants for MPI: Open MPI's `coll tuned`
// component implements each collective with its own algorithm, chosen per
// operation and size, so one set of ring constants cannot price them all (past
// the shared-memory threshold a reduce-scatter of 32 KB costs more than an
// allreduce of 32 KB while an allgather shows no step). At one rank count the
// ring's step count is fixed per op, so base and hop latency are collinear, and
// so are the link and the reduction rate: what the samples identify per op and
// regime is a fixed cost and a cost per byte,
//   t = base + bytes x bus factor / GBps       (sim::own_op_us, sim/collective_mpi.h)
// fitted by fit.h's non-negative relative least squares. An op with fewer
// distinct sizes than these two constants in a regime has none there and
// takes the shared constants (validation/fit_regimes.h).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/topology.h"
#include "validation/fit.h"

namespace coconet::validation {

struct OpFit {
  double base_us = 0;  // fixed cost: base plus the steps' hops
  double GBps = 0;     // bus bandwidth with the reduction's cost folded in (infinite: nothing per byte)
  int samples = 0;     // microbenchmarks it was fitted to
};

struct OpRegimesFit {
  std::optional<OpFit> small;  // below the threshold (every size with one regime)
  std::optional<OpFit> large;  // from the threshold on
};

struct PerOpFit {
  int ranks = 0;                              // the rank count the constants hold at (a send's: any); 0: none fitted
  std::map<std::string, OpRegimesFit> ops;    // by op name ("allreduce", ...)
};

// Distinct sample sizes an op needs in a regime for its own constants.
inline constexpr std::size_t kOpConstants = 2;

// The fit's constants as the simulator's (sim::OpConstants) and its time (sim::own_op_us).
[[nodiscard]] sim::OpConstants op_constants(const OpFit& f);
[[nodiscard]] double op_model_us(const OpFit& f, const std::string& op, double bytes, int ranks);

// One op's constants from its samples (all of one op and rank count); empty
// with fewer distinct sizes than constants.
[[nodiscard]] std::optional<OpFit> fit_op(const std::vector<CollectiveSample>& s);

// Every op's constants below and from `threshold_bytes` (0: one regime), at the
// rank count most collective samples have (samples at other counts are left
// out); a send's at any count (two ranks, one step, whatever the group).
[[nodiscard]] PerOpFit fit_per_op(const std::vector<CollectiveSample>& s, double threshold_bytes);

}  // namespace coconet::validation
