// The ring formula (sim/ring_features.h).
#include "sim/ring_features.h"

#include "sim/collective.h"
#include "sim/units.h"

namespace coconet::sim {

RingFeatures ring_features(model::OpKind op, int ranks, int nodes, double bytes, bool send_crosses_nodes) {
  RingFeatures f;
  f.bus_bytes = bytes * bus_factor(op, ranks);
  f.reduced_bytes = bytes * reduce_factor(op, ranks);
  if (op == model::OpKind::send) {
    (send_crosses_nodes ? f.inter_steps : f.intra_steps) = 1;
    return f;
  }
  const bool ar = op == model::OpKind::allreduce;
  const int steps = ar ? 2 * (ranks - 1) : ranks - 1;
  const int inter = ar ? 2 * (nodes - 1) : nodes - 1;
  f.intra_steps = steps - inter;
  f.inter_steps = inter;
  return f;
}

RingFeatures ring_features(const CollectiveRequest& r) {
  return ring_features(r.op, r.where.ranks, r.where.nodes, r.bytes, r.where.send_crosses_nodes);
}

double ring_hops_us(const RingConstants& c, const RingFeatures& f) {
  return f.intra_steps * c.hop_us + f.inter_steps * c.net_hop_us;
}

double ring_transfer_us(const RingConstants& c, const RingFeatures& f) { return transfer_us(f.bus_bytes, c.link_GBps); }

double ring_reduce_us(const RingConstants& c, const RingFeatures& f) {
  return f.reduced_bytes > 0 ? transfer_us(f.reduced_bytes, c.reduce_GBps) : 0.0;
}

double ring_us(const RingConstants& c, const RingFeatures& f) {
  return c.base_us + ring_hops_us(c, f) + ring_transfer_us(c, f) + ring_reduce_us(c, f);
}

}  // namespace coconet::sim
