// The cost of an all-to-all (model::OpKind::alltoall): every rank sends each
// other rank the 1/P of its slice that rank holds afterwards, all pairs at
// once (NCCL runs it as P-1 grouped sends and receives). `bytes` is one
// rank's slice, as nccl-tests' alltoall sizes it; a rank sends (P-1)/P of it,
// the part for the peers on its node over NVLink and the rest over its share
// of the node's NICs, the two at the same time, each at the share of the
// link's rate NCCL's all-to-all was measured to reach
// (nccl.alltoall_efficiency, sim/topology.h).
#pragma once

#include "sim/collective.h"

namespace coconet::sim {

// The cost with protocol `proto` and `channels` channels (the protocol and
// the channels scale the links as they do a ring's).
[[nodiscard]] CollectiveCost alltoall_cost(const Topology& t, const CollectiveRequest& r, model::Proto proto,
                                           int channels);

// What one rank's all-to-all puts on its NVLink, its share of the NICs and its HBM.
[[nodiscard]] LinkTraffic alltoall_traffic(const Topology& t, const CollectiveRequest& r, const CollectiveCost& c);

}  // namespace coconet::sim
