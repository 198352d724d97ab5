// A transformer layer's forward and backward on one micro-batch, priced as
// the project's layer programs (workloads/megatron_layer_fwd.yaml and
// megatron_layer_bwd.yaml, or their sequence-parallel variants
// megatron_layer_sp_*.yaml) through the tuner (sim/tuner.h): every schedule
// of each program, at the step's shapes and dtype, is predicted on the
// tensor-parallel group's placement and the best is taken. Without TP
// overlap (Megatron-LM SC'21) only the schedules that neither overlap stages
// nor fuse a collective with computation are candidates. Results are cached
// per distinct shape: a layout search asks for a few many times.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/program.h"
#include "model/schedule.h"
#include "sim/topology.h"

namespace coconet::step {

// The layer's sizes on the whole TP group (the programs slice them over tp).
struct LayerShape {
  std::int64_t micro_batch = 1;  // b
  std::int64_t sequence = 1;     // s
  std::int64_t heads = 1;        // a
  std::int64_t head_dim = 1;     // h / a
  std::int64_t ffn = 1;          // f
  int tp = 1;
  model::DType dtype = model::DType::bf16;
  bool sequence_parallel = false;
  bool tp_overlap = false;  // may the tuner pick overlapped or collective-fused schedules
};

// One pass (forward or backward) of one layer: the tuner's best schedule.
struct LayerPass {
  std::string schedule;       // e.g. "AR" names the stages; see model::Schedule::name
  double time_us = 0;         // the schedule's predicted time
  double gemm_us = 0;         // its matmul stages alone
  double elementwise_us = 0;  // its element-wise stages alone (row reductions included)
  // The rest, time_us less its compute stages: the TP collectives (and
  // collective-fused stages) left exposed.
  [[nodiscard]] double tp_us() const { return time_us - gemm_us - elementwise_us; }
};

struct LayerBlock {
  LayerPass fwd;
  LayerPass bwd;
};

class LayerBlockPricer {
 public:
  // Prices on `t` (the step's topology).
  explicit LayerBlockPricer(const sim::Topology& t);

  [[nodiscard]] LayerBlock price(const LayerShape& x);

  [[nodiscard]] int tuned() const { return int(cache_.size()); }  // distinct layers priced

 private:
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, int, bool, bool>;
  struct Programs {
    std::vector<model::Schedule> all;
    std::vector<model::Schedule> unoverlapped;
  };
  [[nodiscard]] const std::vector<model::Schedule>& schedules(const std::string& workload, model::DType d,
                                                              bool overlap);
  [[nodiscard]] LayerPass tune(const std::string& workload, const LayerShape& x);

  sim::Topology topology_;
  std::map<std::pair<std::string, int>, Programs> programs_;  // per (workload, dtype)
  std::map<Key, LayerBlock> cache_;
};

}  // namespace coconet::step
