// MPI's fitted collective cost (sim/collective_mpi.h).
#include "sim/collective_mpi.h"

#include "sim/units.h"

namespace coconet::sim {

namespace {

// MPI runs its own algorithm: the request's choice reported back, auto as ring and simple.
CollectiveCost as_asked(const CollectiveRequest& r) {
  return {r.algo == model::Algo::auto_ ? model::Algo::ring : r.algo,
          r.proto == model::Proto::auto_ ? model::Proto::simple : r.proto};
}

CollectiveCost own_cost(const OpConstants& own, const CollectiveRequest& r, const RingFeatures& x) {
  CollectiveCost c = as_asked(r);
  c.base_us = own.base_latency_us;
  c.link_GBps = own.link_GBps;
  c.transfer_us = own_op_us(own, x) - own.base_latency_us;
  c.bottleneck = Link::nvlink;
  return c;
}

CollectiveCost ring_cost(const RingConstants& k, const CollectiveRequest& r, const RingFeatures& x, Link bottleneck) {
  CollectiveCost c = as_asked(r);
  c.base_us = k.base_us;
  c.hops_us = ring_hops_us(k, x);
  c.reduce_us = ring_reduce_us(k, x);
  c.transfer_us = ring_transfer_us(k, x) + c.reduce_us;
  c.link_GBps = r.op == model::OpKind::send ? k.link_GBps : k.link_GBps / bus_factor(r.op, r.where.ranks);
  c.bottleneck = bottleneck;
  return c;
}

// Below the threshold (or with one regime): the op's own constants where the fit has them, else the shared ones.
CollectiveCost small_cost(const MpiFit& f, const CollectiveRequest& r) {
  const RingFeatures x = ring_features(r);
  const OpRegimes* own = own_regimes(f.per_op, r.op, r.where);
  if (own && own->small) return own_cost(*own->small, r, x);
  return ring_cost(f.small, r, x, f.bottleneck);
}

}  // namespace

const OpRegimes* own_regimes(const std::optional<PerOp>& per_op, model::OpKind op, const Placement& where) {
  if (!per_op) return nullptr;
  const bool applies =
      op == model::OpKind::send ? !where.send_crosses_nodes : where.ranks == per_op->ranks && where.nodes == 1;
  return applies ? per_op->find(op) : nullptr;
}

double own_op_us(const OpConstants& c, const RingFeatures& f) {
  return c.base_latency_us + transfer_us(f.bus_bytes, c.link_GBps);
}

CollectiveCost mpi_cost(const MpiFit& f, const CollectiveRequest& r) {
  if (!f.large || r.bytes < f.from_bytes) return small_cost(f, r);
  const OpRegimes* own = own_regimes(f.per_op, r.op, r.where);
  CollectiveCost c = own && own->large ? own_cost(*own->large, r, ring_features(r))
                                       : ring_cost(*f.large, r, ring_features(r), f.bottleneck);
  CollectiveRequest at = r;
  at.bytes = f.from_bytes;
  const double step_floor_us = small_cost(f, at).time_us();
  if (c.time_us() < step_floor_us) {  // the step's cost, as a fixed cost: exactly the floor, whatever the size
    c.base_us = step_floor_us;
    c.hops_us = c.transfer_us = c.reduce_us = 0;
  }
  return c;
}

}  // namespace coconet::sim
