// A transformer layer's forward and backward on one micro-batch, priced as
// the project's layer programs through the tuner (sim/tuner.h): the GPT
// family's workloads/megatron_layer_fwd.yaml and megatron_layer_bwd.yaml (or
// their sequence-parallel variants megatron_layer_sp_*.yaml), the Llama
// family's llama_layer_*.yaml (RMSNorm, GQA, SwiGLU), the Nemotron family's
// nemotron_layer_*.yaml (LayerNorm, GQA, squared ReLU), the MLA family's
// mla_layer_*.yaml (DeepSeek-V3: multi-head latent attention, SwiGLU). Every schedule
// of each program, at the step's shapes and dtype, is predicted on the
// tensor-parallel group's placement and the best is taken. Without TP
// overlap (Megatron-LM SC'21) only the schedules that neither overlap stages
// nor fuse a collective with computation are candidates. A TP group of one
// rank runs no collective (Megatron-LM's f and g operators return their input
// when the group has one rank), so at tp = 1 a schedule is priced by its
// computation alone (the simulator prices a collective on one rank as the
// local copy the executor makes). Results are cached per distinct shape: a
// layout search asks for a few many times.
// Kernel choices (model/kernel_fusion.h): each schedule is priced as written,
// with its compute stages fused into one kernel each (Megatron-LM's fused
// norms and softmax), with its attention core as one flash-attention kernel
// (causal: the step's models are decoders), and with both, priced as
// Megatron-LM runs such kernels (sim::Context::fused_kernels); the fastest
// wins, so the schedule names say which were chosen (K: a fused kernel, FA:
// flash attention).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "model/program.h"
#include "model/schedule.h"
#include "plan/step_plan.h"
#include "sim/context.h"
#include "sim/topology.h"
#include "sim/tuner.h"
#include "step/moe_block.h"
#include "step/spec.h"

namespace coconet::step {

// The layer's sizes on the whole TP group (the programs slice them over tp).
struct LayerShape {
  std::int64_t micro_batch = 1;  // b
  std::int64_t sequence = 1;     // s
  std::int64_t heads = 1;        // a
  std::int64_t head_dim = 1;     // D (h / a unless the model says)
  std::int64_t ffn = 1;          // f
  int tp = 1;
  model::DType dtype = model::DType::bf16;
  bool sequence_parallel = false;
  bool tp_overlap = false;  // may the tuner pick overlapped or collective-fused schedules
  Family family = Family::gpt;  // which programs: megatron_layer_*, llama_layer_*, nemotron_layer_* or mla_layer_*
  std::int64_t hidden = 0;      // h (llama and nemotron programs; 0: a D, the gpt programs' hidden)
  std::int64_t kv_heads = 0;    // K/V heads (llama and nemotron programs; 0: a)
  // Multi-head latent attention (the mla programs; head_dim is then the
  // query's and key's, nope + rope): its latents and the value's head_dim.
  Mla mla;
  // The linear layers' GEMMs in FP8 (`dtype: fp8`: sim::Context::fp8_gemms);
  // the programs' values stay in `dtype`.
  bool fp8 = false;
  // The kernels the tuner may choose (step/spec.h Training): flash attention,
  // fused compute stages.
  bool flash_attention = true;
  bool fused_kernels = true;
};

// The programs' sizes for `x` (gpt: B, S, NH, D, F; llama and nemotron: B, S, H, KV, G, GQ, D, F; mla:
// B, S, H, NH, QR, KR, KE, DQ, DV, DKV, F).
[[nodiscard]] model::Bindings layer_bindings(const LayerShape& x);
// The forward and backward programs of `x`'s family and sequence parallelism.
[[nodiscard]] std::pair<std::string, std::string> layer_programs(const LayerShape& x);

// One pass (forward or backward) of one layer: the tuner's best schedule.
struct LayerPass {
  std::string schedule;       // e.g. "AR" names the stages; see model::Schedule::name
  double time_us = 0;         // the schedule's predicted time
  double gemm_us = 0;         // its matmul stages and flash-attention kernels alone
  double elementwise_us = 0;  // its element-wise stages alone (row reductions and fused kernels included)
  double attention_us = 0;    // of gemm_us, its flash-attention kernels (0 with the attention materialised)
  bool flash_attention = false;  // the schedule runs the attention core as flash attention
  bool fused_kernels = false;    // it fuses compute stages into one kernel each (fuse_kernel)
  // The rest, time_us less its compute stages: the TP collectives (and
  // collective-fused stages) left exposed. Subtracted as one sum, so that a
  // pass whose time is its computation (tp 1) leaves exactly 0.
  [[nodiscard]] double tp_us() const { return time_us - (gemm_us + elementwise_us); }
};

struct LayerBlock {
  LayerPass fwd;
  LayerPass bwd;
};

// The layer a step prices for `s` laid out as `l`, the one predict_step
// prices (step/compose.cpp): one micro-batch, the rank's sequence share
// (sequence / cp), the step's tp, sequence parallelism, TP overlap, GEMM
// precision and the kernels the model allows.
[[nodiscard]] LayerShape step_layer_shape(const ModelSpec& s, const Layout& l);

// The kernel choices of a step's layer, as `coconet step` prints them: what
// the tuner chose for each pass (model/kernel_fusion.h) and the GEMMs'
// precision.
struct KernelChoices {
  bool flash_attention_fwd = false;  // the attention core as one flash kernel
  bool flash_attention_bwd = false;
  bool fused_kernels_fwd = false;  // compute stages (norms, softmax, ...) as one kernel each
  bool fused_kernels_bwd = false;
  bool fp8_gemms = false;  // the linear layers' GEMMs in FP8 (the attention's stay in the values' dtype)
  model::DType dtype = model::DType::bf16;  // the values' (and the other GEMMs') precision
};
[[nodiscard]] KernelChoices kernel_choices_of(const LayerBlock& b, const LayerShape& x);

class LayerBlockPricer {
 public:
  // Prices on `t` (the step's topology).
  explicit LayerBlockPricer(const sim::Topology& t);

  // The shape's block, cached: the reference stays valid as long as the pricer.
  [[nodiscard]] const LayerBlock& price(const LayerShape& x);

  [[nodiscard]] int tuned() const { return int(cache_.size()) + moe_.tuned(); }  // distinct layers priced
  // How many times a program's schedules were lowered (the dense layers'; at
  // most twice per layer tuned: an fp8 twin reuses its twin's plans).
  [[nodiscard]] int lowerings() const { return lowerings_; }
  // The MoE programs' pricer on the same topology: an MoE layer is the
  // attention of these programs and the experts of those (step/moe_block.h).
  [[nodiscard]] MoeBlockPricer& moe() { return moe_; }

 private:
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, int, bool, bool,
                         int, std::int64_t, std::int64_t, bool, bool, bool,
                         Mla>;
  struct Programs {
    std::vector<model::Schedule> bases;  // model::enumerate_schedules
    std::optional<sim::ScheduleList> all;  // with their kernel choices: made when first asked for
    sim::ScheduleList unoverlapped;
  };
  [[nodiscard]] const sim::ScheduleList& schedules(const std::string& workload, const LayerShape& x, bool overlap);
  [[nodiscard]] LayerPass tune(const std::string& workload, const LayerShape& x);
  // The schedules of `workload` lowered at `x`'s sizes, tp, dtype and kernels:
  // the last shape's kept per workload, so that the shape's twin in the other
  // GEMM precision (fp8 changes the pricing, not the plans; the search tries
  // the two one after the other) is not lowered again.
  [[nodiscard]] std::vector<plan::StepPlan>& lowered(const std::string& workload, const LayerShape& x,
                                                          const sim::ScheduleList& schedules,
                                                          const sim::Context& ctx);

  sim::Topology topology_;
  // per (workload, dtype, flash attention allowed, fused kernels allowed)
  std::map<std::tuple<std::string, int, bool, bool>, Programs> programs_;
  std::map<Key, LayerBlock> cache_;
  // What a lowering depends on besides the workload: its schedules (dtype,
  // flash attention and fused kernels allowed, TP overlap), its sizes and tp.
  using LowerKey = std::tuple<int, bool, bool, bool, model::Bindings, int>;
  struct Lowered {
    LowerKey key;
    std::vector<plan::StepPlan> plans;
  };
  std::map<std::string, Lowered> lowered_;  // per workload: the last shape's
  int lowerings_ = 0;                       // schedule lists lowered (a test's count of reuse)
  MoeBlockPricer moe_;
};

}  // namespace coconet::step
