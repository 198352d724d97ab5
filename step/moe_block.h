// A mixture-of-experts MLP's forward and backward on one micro-batch, priced
// as the project's MoE programs (workloads/moe_layer_fwd.yaml,
// moe_layer_bwd.yaml) through the tuner on the expert-parallel group: the
// router, the dispatch all-to-all, the experts' grouped GEMMs (a batched
// matmul over the rank's experts, each product priced at its own per-expert
// shape by the simulator's GEMM model: few tokens per expert fill few tiles),
// SwiGLU, the combine all-to-all and the weighted sum. Every unoverlapped
// schedule of each program is predicted at the step's shapes and dtype and
// the best taken. The all-to-all is priced by the simulator
// (sim/alltoall.h): the part for peers on the node over NVLink, the rest over
// the node's NICs. The tokens an expert computes are the hottest expert's
// (tokens x top_k / experts x imbalance, or the capacity), which every
// expert is padded to: the slowest rank sets the time. An expert-parallel
// group of one rank runs no all-to-all (a schedule is priced by its
// computation alone). Results are cached per distinct shape.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/schedule.h"
#include "sim/topology.h"
#include "sim/tuner.h"
#include "step/collective_times.h"
#include "step/spec.h"

namespace coconet::step {

// The MoE programs' sizes over the expert-parallel group.
struct MoeShape {
  std::int64_t tokens = 1;   // T: tokens of the whole group (each rank its T / ep)
  std::int64_t hidden = 1;   // H
  std::int64_t experts = 1;  // E
  std::int64_t top_k = 1;    // K
  std::int64_t slots = 1;    // S: tokens the hottest expert computes (every expert padded to it)
  std::int64_t ffn = 1;      // F: an expert's columns on one rank (expert_ffn / etp)
  int ep = 1;
  int etp = 1;  // the EP group's ranks are etp apart (Megatron-core's expert rank order)
  model::DType dtype = model::DType::bf16;
  bool fp8 = false;
  bool deepep = false;  // the all-to-alls are DeepEP's kernels, not NCCL's (deepep_topology)

  [[nodiscard]] auto key() const {
    return std::make_tuple(tokens, hidden, experts, top_k, slots, ffn, ep, etp, int(dtype), fp8, deepep);
  }
};

// The MoE layer `s` laid out as `l` prices for one micro-batch: each rank's
// tokens (micro-batch x sequence / (cp x tp), x etp: an expert-TP group
// shares its tokens), the hottest expert's slots, the expert ffn over etp.
[[nodiscard]] MoeShape step_moe_shape(const ModelSpec& s, const Layout& l);
// The programs' sizes (T, H, E, K, S, F).
[[nodiscard]] model::Bindings moe_bindings(const MoeShape& x);

// One pass of the MoE programs: the tuner's best schedule.
struct MoePass {
  std::string schedule;
  double time_us = 0;
  double gemm_us = 0;         // matmul stages (the grouped GEMMs, the router)
  double elementwise_us = 0;  // element-wise and row-reduction stages
  // The rest: the all-to-alls left exposed (0 on one rank).
  [[nodiscard]] double a2a_us() const { return time_us - (gemm_us + elementwise_us); }
};

struct MoeBlock {
  MoePass fwd;
  MoePass bwd;
};

// The topology DeepEP's kernels move tokens on (moe.dispatcher deepep): `t`
// with all-to-alls at the links' full rates (nccl.alltoall_efficiency 1).
// DeepEP's README (github.com/deepseek-ai/DeepEP, the V1 table of its
// normal kernels, H800 with a 400 Gb/s ConnectX-7 per GPU): 153-158 GB/s
// within a node, of the about 160 the H800's NVLink reaches; 43-58 GB/s
// "RDMA bottleneck bandwidth" across 2-8 nodes, of the NIC's 50.
[[nodiscard]] sim::Topology deepep_topology(const sim::Topology& t);

class MoeBlockPricer {
 public:
  explicit MoeBlockPricer(const sim::Topology& t);
  // The shape's block, cached: the reference stays valid as long as the pricer.
  [[nodiscard]] const MoeBlock& price(const MoeShape& x);
  [[nodiscard]] int tuned() const { return int(cache_.size()); }
  // The formula-priced all-to-alls of DeepEP's two-hop dispatch, on
  // deepep_topology.
  [[nodiscard]] CollectiveTimes& deepep_collectives() { return deepep_collectives_; }

 private:
  [[nodiscard]] const sim::ScheduleList& schedules(const std::string& workload, model::DType d);
  [[nodiscard]] MoePass tune(const std::string& workload, const MoeShape& x);

  sim::Topology topology_;
  sim::Topology deepep_topology_;
  CollectiveTimes deepep_collectives_;
  std::map<std::pair<std::string, int>, sim::ScheduleList> programs_;
  std::map<decltype(MoeShape{}.key()), MoeBlock> cache_;
};

}  // namespace coconet::step
