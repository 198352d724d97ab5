// All-to-all pricing (see alltoall.h).
#include "sim/alltoall.h"

#include <algorithm>

#include "sim/units.h"

namespace coconet::sim {
namespace {

// Payload bytes a protocol carries per byte on the wire (LL and LL128 add flags).
double protocol_efficiency(const Topology& t, model::Proto p) {
  switch (p) {
    case model::Proto::ll: return t.nccl.ll_efficiency;
    case model::Proto::ll128: return t.nccl.ll128_efficiency;
    default: return 1.0;
  }
}

// What one rank sends to the peers on its node and to those on other nodes.
struct Split {
  double nvlink = 0;
  double network = 0;
};

Split split_of(const CollectiveRequest& r) {
  const double n = r.where.ranks;
  const double g = r.where.per_node;
  return {r.bytes * (g - 1) / n, r.bytes * (n - g) / n};
}

}  // namespace

CollectiveCost alltoall_cost(const Topology& t, const CollectiveRequest& r, model::Proto proto, int channels) {
  const Split s = split_of(r);
  const double scale = protocol_efficiency(t, proto) * std::min(1.0, double(channels) / t.nccl.channels);
  const double nvlink_GBps = t.node.nvlink_GBps() * t.nccl.alltoall_efficiency.nvlink * scale;
  // The node's NICs (one per GPU at most in use) shared by its GPUs.
  const double nic_GBps = t.network.share_GBps(r.where.per_node) * t.nccl.alltoall_efficiency.network * scale;
  const double intra_us = transfer_us(s.nvlink, nvlink_GBps);
  const double inter_us = s.network > 0 ? transfer_us(s.network, nic_GBps) : 0.0;
  CollectiveCost c{model::Algo::ring, proto};
  c.base_us = t.nccl.ring_base_us.at(proto);
  // All pairs in flight at once: one step's latency on each kind of link crossed.
  c.hops_us = t.node.hop_latency_us.at(proto) + (r.where.nodes > 1 ? t.network.hop_latency_us.at(proto) : 0.0);
  c.transfer_us = std::max(intra_us, inter_us);
  c.link_GBps = c.transfer_us > 0 ? rate_GBps(r.bytes, c.transfer_us) : nvlink_GBps;
  c.bottleneck = inter_us > intra_us ? Link::network : Link::nvlink;
  return c;
}

LinkTraffic alltoall_traffic(const Topology& t, const CollectiveRequest& r, const CollectiveCost& c) {
  const Split s = split_of(r);
  const double wire = 1.0 / protocol_efficiency(t, c.proto);
  LinkTraffic out;
  out.nvlink = s.nvlink * wire;
  out.network = s.network * wire;
  out.hbm = (s.nvlink + s.network) * t.nccl.hbm_bytes_per_link_byte;
  return out;
}

}  // namespace coconet::sim
