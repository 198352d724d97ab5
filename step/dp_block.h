// The data-parallel gradient reduction and the optimizer step of one gradient
// bucket, priced as the project's adam workload (workloads/adam.yaml:
// allreduce of the gradients, Adam on 32-bit weights and moments) through
// the tuner (sim/tuner.h): every schedule of the workload that keeps the
// optimizer state as the ZeRO stage does (replicated for ZeRO 0; sliced over
// the data-parallel group, as_slice, from ZeRO 1) is predicted on the group's
// placement and the best is taken. The gradients are in the step's gradient
// dtype (the workload's g retyped: 16-bit or f32 reduction go the same way,
// so f32 moves twice the bytes). This is the step's only price of Adam: a
// group of one rank (dp 1) runs no collective (DDP and Megatron-LM skip it),
// so its schedules are priced by their computation alone, as
// step/layer_block.h does at tp 1. Results are cached per (parameters, group,
// state, dtype): a layout search asks for a few distinct ones many times.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/schedule.h"
#include "sim/collective.h"
#include "sim/topology.h"
#include "step/collective_times.h"

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
  // Cached: the reference stays valid as long as the pricer.
  [[nodiscard]] const DpBlock& price(std::int64_t params, const sim::Placement& group, bool sliced_state,
                              model::DType grad_dtype = model::DType::f16);

  [[nodiscard]] int tuned() const { return int(cache_.size()); }  // distinct blocks priced
  // The step's other collectives on the same topology, priced by formula
  // (step/collective_times.h): the cache a search shares across layouts.
  [[nodiscard]] CollectiveTimes& collectives() { return collectives_; }

 private:
  using Key = std::tuple<std::int64_t, int, int, int, int, bool, int>;
  struct Schedules {
    std::vector<model::Schedule> replicated;  // the adam schedules without as_slice
    std::vector<model::Schedule> sliced;      // with as_slice
  };
  const Schedules& schedules(model::DType grad_dtype);  // enumerated once per gradient dtype
  sim::Topology topology_;
  std::map<int, Schedules> schedules_;
  std::map<Key, DpBlock> cache_;
  CollectiveTimes collectives_;
};

}  // namespace coconet::step
