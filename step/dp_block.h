// The data-parallel gradient reduction and the optimizer step of one gradient
// bucket, priced as the project's adam workload (workloads/adam.yaml:
// allreduce of 16-bit gradients, Adam on 32-bit weights and moments) through
// the tuner (sim/tuner.h): every schedule of the workload that keeps the
// optimizer state as the ZeRO stage does (replicated for ZeRO 0; sliced over
// the data-parallel group, as_slice, from ZeRO 1) is predicted on the group's
// placement and the best is taken. Results are cached per (parameters, group,
// state): a layout search asks for a few distinct ones many times.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/schedule.h"
#include "sim/collective.h"
#include "sim/topology.h"

namespace coconet::step {

struct DpBlock {
  std::string schedule;  // the tuner's best, e.g. "fuse(AR-C)" or "fuse(RS-C-AG)+asSlice(m,v)"
  double time_us = 0;
};

class DpBlockPricer {
 public:
  // Prices on `t` (the step's topology, its node count included).
  explicit DpBlockPricer(const sim::Topology& t);

  // One bucket of `params` parameters (rounded up to whole slices of the
  // group, as a padded bucket) reduced over `group` and updated;
  // `sliced_state`: ZeRO 1 and up (optimizer state sliced), else ZeRO 0.
  [[nodiscard]] DpBlock price(std::int64_t params, const sim::Placement& group, bool sliced_state);

  [[nodiscard]] int tuned() const { return int(cache_.size()); }  // distinct blocks priced

 private:
  using Key = std::tuple<std::int64_t, int, int, int, bool>;
  void enumerate();  // the adam workload's schedules, split by as_slice
  sim::Topology topology_;
  std::vector<model::Schedule> replicated_;  // the adam schedules without as_slice
  std::vector<model::Schedule> sliced_;      // with as_slice
  std::map<Key, DpBlock> cache_;
};

}  // namespace coconet::step
