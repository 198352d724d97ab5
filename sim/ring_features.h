// The one formula of a ring collective's time, as a sum of constants times
// features: what the NCCL model prices per protocol (sim/collective.cpp), what
// the MPI fit prices (sim/collective_mpi.h) and what calibration's least
// squares fits constants to (validation/fit.h) are this function of these
// features, so no formula is written twice.
//
//   t = base + intra_steps x hop + inter_steps x net_hop
//            + bus_bytes / link + reduced_bytes / reduce
//
// Steps: 2(n-1) for an allreduce (reduce-scatter then all-gather), n-1 for the
// other collectives, 1 for a send, of which 2(nodes-1) (allreduce) or nodes-1
// cross the network. Bus bytes: the buffer x nccl-tests' bus factor, what each
// rank's busiest link carries. Reduced bytes: the buffer x the share a rank
// combines ((n-1)/n for the reducing collectives, else 0).
#pragma once

#include <limits>

#include "model/schedule.h"
#include "sim/collective.h"

namespace coconet::sim {

struct RingFeatures {
  double intra_steps = 0;    // steps between ranks of one node
  double inter_steps = 0;    // steps that cross the network
  double bus_bytes = 0;      // bytes x the op's bus factor
  double reduced_bytes = 0;  // bytes x the op's reduce factor
  [[nodiscard]] double steps() const { return intra_steps + inter_steps; }
};

// `bytes` (nccl-tests' size) of `op` over `ranks` ranks on `nodes` nodes; a
// send is one step, across the network when `send_crosses_nodes`.
[[nodiscard]] RingFeatures ring_features(model::OpKind op, int ranks, int nodes, double bytes,
                                         bool send_crosses_nodes = false);
// The features of a request (its op, size and placement).
[[nodiscard]] RingFeatures ring_features(const CollectiveRequest& r);

struct RingConstants {
  double base_us = 0;     // paid once a collective
  double hop_us = 0;      // a step between ranks of one node
  double net_hop_us = 0;  // a step across the network
  double link_GBps = std::numeric_limits<double>::infinity();    // bus bandwidth (infinite: free)
  double reduce_GBps = std::numeric_limits<double>::infinity();  // combining received bytes (infinite: free)
};

// The parts of the formula: the steps' latency, the bus transfer, the reduction.
[[nodiscard]] double ring_hops_us(const RingConstants& c, const RingFeatures& f);
[[nodiscard]] double ring_transfer_us(const RingConstants& c, const RingFeatures& f);
[[nodiscard]] double ring_reduce_us(const RingConstants& c, const RingFeatures& f);
// The whole: base + hops + transfer + reduction.
[[nodiscard]] double ring_us(const RingConstants& c, const RingFeatures& f);

}  // namespace coconet::sim
