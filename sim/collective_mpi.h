// MPI's collective cost, the way calibration fits it on the cpu backend's
// topologies (device: cpu), one of the two collective-cost implementations
// beside NCCL's tuning table (sim/collective.h):
// - shared ring constants (sim/ring_features.h), one set below a message size
//   and optionally another from it on: MPI's transport changes protocol there
//   (eager, then rendezvous), and a collective's cost jumps;
// - each op's own constants at the calibrated rank count on one node (Open
//   MPI's `coll tuned` runs each op its own algorithm): base + bus bytes /
//   link, the base holding the steps' latency, the rate the reduction's cost;
// - past the threshold never cheaper than the first regime at it (a step up:
//   time never falls as the size grows).
// MPI has no NCCL algorithm, protocol or channel: a request's are reported
// back as asked (ring and simple for auto) and priced the same.
//
// The simulator prices a cpu topology's collectives with `mpi_cost` on the
// fit its keys state (collective.cpp); calibration evaluates candidate fits
// with the same function (validation/fit_regimes.h).
#pragma once

#include <optional>

#include "sim/collective.h"
#include "sim/ring_features.h"
#include "sim/topology.h"

namespace coconet::sim {

struct MpiFit {
  RingConstants small;                // every size with one regime
  std::optional<RingConstants> large; // from `from_bytes` on
  double from_bytes = 0;
  std::optional<PerOp> per_op;        // each op's own constants, at per_op->ranks ranks on one node
  Link bottleneck = Link::nvlink;     // what the shared constants' link is (the network across hosts)
};

// The op's own constants (`per_op`) where they apply to `where`: a collective
// at the calibrated rank count on one node, a send within a node.
[[nodiscard]] const OpRegimes* own_regimes(const std::optional<PerOp>& per_op, model::OpKind op,
                                           const Placement& where);

// An op's own constants at work: base + bus bytes / link.
[[nodiscard]] double own_op_us(const OpConstants& c, const RingFeatures& f);

// The cost of `r` under the fit (r on two ranks or more: one rank is the
// caller's, sim/collective.h).
[[nodiscard]] CollectiveCost mpi_cost(const MpiFit& f, const CollectiveRequest& r);

}  // namespace coconet::sim
