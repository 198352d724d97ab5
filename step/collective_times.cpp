// The step's formula-priced collectives, cached (see collective_times.h).
#include "step/collective_times.h"

#include <functional>
#include <type_traits>

namespace coconet::step {

CollectiveTimes::CollectiveTimes(const sim::Topology& t) : topology_(t) {}

std::size_t CollectiveTimes::KeyHash::operator()(const Key& k) const {
  // boost::hash_combine's mixing step (its constant: 2^64 / the golden ratio)
  constexpr std::size_t kGolden = 0x9e3779b97f4a7c15ULL;
  std::size_t h = 0;
  const auto mix = [&](std::size_t v) { h ^= v + kGolden + (h << 6) + (h >> 2); };
  std::apply([&](const auto&... field) { (mix(std::hash<std::decay_t<decltype(field)>>{}(field)), ...); }, k);
  return h;
}

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
