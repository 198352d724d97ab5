// The step's formula-priced collectives, cached (see collective_times.h).
#include "step/collective_times.h"

namespace coconet::step {

CollectiveTimes::CollectiveTimes(const sim::Topology& t) : topology_(t) {}

double CollectiveTimes::us(model::OpKind op, double bytes, const sim::Placement& where) {
  if (where.ranks <= 1 || bytes <= 0) return 0;
  const Key key{int(op), bytes, where.ranks, where.nodes, where.per_node, where.send_crosses_nodes, where.pods};
  if (const auto hit = cache_.find(key); hit != cache_.end()) return hit->second;
  sim::CollectiveRequest r;
  r.op = op;
  r.bytes = bytes;
  r.where = where;
  const double us = sim::predict_collective(topology_, r).time_us();
  cache_.emplace(key, us);
  return us;
}

}  // namespace coconet::step
