// The two-regime collective fit: MPI's shared-memory transport changes protocol
// with the message size (eager below a limit, rendezvous above), and on a CPU
// the cost of a collective jumps there. Below a threshold one set of ring
// constants (base, hop, link rate, reduction rate), from it on another, each
// fitted by fit.h's non-negative relative least squares. The threshold is the
// MPI library's own limit where it can be read (mpi_limits.h), else the sample
// size that minimises the residual; a second regime is kept only when it
// explains the samples better than one by more than its extra constants
// could by chance (the Bayesian information criterion, Schwarz 1978).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/collective_mpi.h"
#include "validation/fit.h"
#include "validation/fit_per_op.h"

namespace coconet::validation {

struct CollectiveRegimes {
  CollectiveFit small;                 // every size when `large` is empty
  std::optional<CollectiveFit> large;  // collectives of at least threshold_bytes
  double threshold_bytes = 0;          // nccl-tests size (sim/collective.h); 0 with one regime
  std::string threshold_source;        // where the threshold came from ("fit", or the library's command and key)
  double residual = 0;                 // sum of squared relative errors of this model
  double fitted_threshold_bytes = 0;   // the residual-minimising threshold (0: none), for comparison
  // Each op's own constants per regime (validation/fit_per_op.h), in place of
  // `small` / `large` for that op where fitted; empty: the shared ones for all.
  PerOpFit per_op;
};

// The fit as the simulator's MPI model (sim/collective_mpi.h).
[[nodiscard]] sim::MpiFit mpi_fit(const CollectiveRegimes& f);
// The model's time, sim::mpi_cost of mpi_fit(f) on one node: the small regime
// below the threshold, from it on the large one but never less than the small
// regime at the threshold (a step up, never down), in each regime the op's own
// constants where `per_op` has them.
[[nodiscard]] double regimes_model_us(const CollectiveRegimes& f, const std::string& op, double bytes, int ranks);

// The sum of squared relative errors of `f`'s model (regimes_model_us) over `s`:
// what the fit minimises, and `residual` holds for its own samples.
[[nodiscard]] double regimes_residual(const CollectiveRegimes& f, const std::vector<CollectiveSample>& s);

// The two regimes split at `threshold` (no criterion applied); empty when a
// side has fewer samples than a regime has constants.
[[nodiscard]] std::optional<CollectiveRegimes> fit_split(const std::vector<CollectiveSample>& s, double threshold);

// Fits one or two regimes of shared constants (the criterion decides on
// these), then each op's own constants in each regime (per_op). `library_threshold_bytes`: the MPI library's limit
// (with `library_source` saying where it was read), tried instead of a fitted
// threshold; absent, or leaving fewer samples than constants on a side: fitted.
[[nodiscard]] CollectiveRegimes fit_collective_regimes(const std::vector<CollectiveSample>& s,
                                                       std::optional<double> library_threshold_bytes = std::nullopt,
                                                       const std::string& library_source = "");

}  // namespace coconet::validation
