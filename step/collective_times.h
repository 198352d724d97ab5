// The collectives a step prices by formula rather than through the tuner
// (the embedding's tensor-parallel reduction, context parallelism's
// exchanges, ZeRO's reduce-scatters and gathers, the pipeline's sends, the
// FP8 amax reduction, the experts' all-to-alls and expert-TP gathers):
// sim::predict_collective with NCCL's own choices, each distinct (operation,
// bytes, placement) priced once. A layout search asks for a few hundred
// distinct ones some million times (issue 32).
#pragma once

#include <map>
#include <tuple>

#include "sim/collective.h"
#include "sim/topology.h"

namespace coconet::step {

class CollectiveTimes {
 public:
  // Prices on `t` (the step's topology).
  explicit CollectiveTimes(const sim::Topology& t);

  // The time of `op` on `bytes` over `where` (nccl-tests' size on rank 0,
  // sim/collective.h); 0 on one rank or for no bytes.
  [[nodiscard]] double us(model::OpKind op, double bytes, const sim::Placement& where);

 private:
  // (op, bytes, ranks, nodes, per_node, send_crosses_nodes, pods): every field of the request it prices
  using Key = std::tuple<int, double, int, int, int, bool, int>;
  sim::Topology topology_;
  std::map<Key, double> cache_;
};

}  // namespace coconet::step
