// The layer programs through the tuner (see layer_block.h).
#include "step/layer_block.h"

#include <algorithm>
#include <optional>
#include <variant>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/kernel_fusion.h"
#include "model/parse.h"
#include "sim/context.h"
#include "sim/tuner.h"
#include "step/spec.h"
#include "step/tuned_pass.h"

namespace coconet::step {

namespace {

constexpr int kQkvExtraGroups = 2;  // a K/V group's QKV columns: its G queries, its key, its value (GQ = G + 2)

// No stage runs beside another and no collective is fused with computation:
// how Megatron-LM (SC'21) runs a layer's TP collectives.
bool unoverlapped(const model::Schedule& s) {
  return s.overlaps.empty() && std::none_of(s.stages.begin(), s.stages.end(), [](const model::Stage& st) {
           return st.kind == model::StageKind::fused;
         });
}

// The program with every input in the step's dtype (the workloads are
// written in f32 for exact test inputs), its types inferred again.
model::Program at_dtype(model::Program p, model::DType d) {
  for (model::TensorDecl& in : p.inputs) in.type.dtype = d;
  model::check(p);
  return p;
}

std::int64_t hidden_of(const LayerShape& x) { return x.hidden > 0 ? x.hidden : x.heads * x.head_dim; }
std::int64_t kv_heads_of(const LayerShape& x) { return x.kv_heads > 0 ? x.kv_heads : x.heads; }

}  // namespace

model::Bindings layer_bindings(const LayerShape& x) {
  if (family_traits(x.family).attention == AttentionKind::mla) {
    const Mla& a = x.mla;
    return {{"B", x.micro_batch},
            {"S", x.sequence},
            {"H", hidden_of(x)},
            {"NH", x.heads},
            {"QR", a.q_lora_rank},
            {"KR", a.kv_lora_rank},
            {"KE", a.kv_lora_rank + a.qk_rope_head_dim},
            {"DQ", a.qk_nope_head_dim + a.qk_rope_head_dim},
            {"DV", a.v_head_dim},
            {"DKV", a.qk_nope_head_dim + a.v_head_dim},
            {"F", x.ffn}};
  }
  if (!family_traits(x.family).grouped_kv)
    return {{"B", x.micro_batch}, {"S", x.sequence}, {"NH", x.heads}, {"D", x.head_dim}, {"F", x.ffn}};
  const std::int64_t kv = kv_heads_of(x), group = x.heads / kv;
  return {{"B", x.micro_batch}, {"S", x.sequence}, {"H", hidden_of(x)}, {"KV", kv},
          {"G", group},         {"GQ", group + kQkvExtraGroups},      {"D", x.head_dim}, {"F", x.ffn}};
}

std::pair<std::string, std::string> layer_programs(const LayerShape& x) {
  const std::string prefix = std::string(family_traits(x.family).programs) +
                             (on_tp_group(x.sequence_parallel, x.tp) ? "sp_" : "");
  return {prefix + "fwd", prefix + "bwd"};
}

LayerShape step_layer_shape(const ModelSpec& s, const Layout& l) {
  const auto& m = s.model;
  LayerShape x;
  x.micro_batch = s.training.micro_batch;
  x.sequence = m.sequence / l.cp;  // context parallelism: each rank's share of the sequence
  x.heads = m.heads;
  x.head_dim = m.head_dim;
  x.ffn = m.ffn;
  x.tp = l.tp;
  x.dtype = s.training.dtype;
  x.sequence_parallel = sequence_parallel_on(s.parallel, l);
  x.tp_overlap = tp_overlap_on(s.parallel, l);
  x.family = m.family();
  x.hidden = m.hidden;
  x.kv_heads = m.kv_heads;
  x.mla = m.mla;
  x.fp8 = s.training.fp8;
  x.flash_attention = s.training.flash_attention;
  x.fused_kernels = s.training.fused_kernels;
  return x;
}

KernelChoices kernel_choices_of(const LayerBlock& b, const LayerShape& x) {
  KernelChoices k;
  k.flash_attention_fwd = b.fwd.flash_attention;
  k.flash_attention_bwd = b.bwd.flash_attention;
  k.fused_kernels_fwd = b.fwd.fused_kernels;
  k.fused_kernels_bwd = b.bwd.fused_kernels;
  k.fp8_gemms = x.fp8;
  k.dtype = x.dtype;
  return k;
}

LayerBlockPricer::LayerBlockPricer(const sim::Topology& t) : topology_(t), moe_(t) {}

namespace {

// The kernel choices (model/kernel_fusion.h) of the base schedules `keep`
// admits, the mask the step's causal decoders use, less those the shape's
// kernels rule out.
template <typename Keep>
std::vector<model::Schedule> with_kernel_choices(const std::vector<model::Schedule>& bases, const LayerShape& x,
                                                 Keep keep) {
  std::vector<model::Schedule> out;
  for (const model::Schedule& base : bases) {
    if (!keep(base)) continue;
    for (model::Schedule& s : model::kernel_choices(base, std::string(model::kCausalMask))) {
      if (!x.flash_attention && model::uses_flash_attention(s)) continue;
      if (!x.fused_kernels && model::uses_fused_kernels(s)) continue;
      if (keep(s)) out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

// The unoverlapped list is made first, from the unoverlapped base schedules
// (a kernel choice neither overlaps stages nor fuses a collective that its
// base does not: it fuses compute stages only); the whole list only when an
// overlapped layer asks for it (the kernel choices of llama_layer_fwd's 91
// overlapped schedules took 2% of a search that never prices them).
const sim::ScheduleList& LayerBlockPricer::schedules(const std::string& workload, const LayerShape& x, bool overlap) {
  const auto key = std::make_tuple(workload, int(x.dtype), x.flash_attention, x.fused_kernels);
  auto it = programs_.find(key);
  if (it == programs_.end()) {
    Programs ps;
    const model::Program p = at_dtype(model::load_program(model::resolve_workload(workload)), x.dtype);
    ps.bases = model::enumerate_schedules(p);
    ps.unoverlapped = sim::share_programs(with_kernel_choices(ps.bases, x, unoverlapped));
    if (ps.unoverlapped.schedules.empty()) throw InternalError("the " + workload + " workload enumerates no unoverlapped schedule");
    it = programs_.emplace(key, std::move(ps)).first;
  }
  Programs& ps = it->second;
  if (!overlap) return ps.unoverlapped;
  if (!ps.all) ps.all = sim::share_programs(with_kernel_choices(ps.bases, x, [](const model::Schedule&) { return true; }));
  return *ps.all;
}

std::vector<plan::StepPlan>& LayerBlockPricer::lowered(const std::string& workload, const LayerShape& x,
                                                              const sim::ScheduleList& schedules,
                                                              const sim::Context& ctx) {
  LowerKey key{int(x.dtype), x.flash_attention, x.fused_kernels, on_tp_group(x.tp_overlap, x.tp), ctx.sizes, x.tp};
  Lowered& last = lowered_[workload];
  if (last.plans.empty() || !(last.key == key)) {
    last.plans.clear();  // freed first: the next shape's plans are made in their memory
    last.plans = sim::lower_unchunked(schedules, ctx);
    last.key = std::move(key);
    ++lowerings_;
  }
  return last.plans;
}

LayerPass LayerBlockPricer::tune(const std::string& workload, const LayerShape& x) {
  sim::Context ctx{topology_, x.tp, layer_bindings(x), std::nullopt};
  ctx.fused_kernels = true;  // as Megatron-LM runs a kernel stage: one kernel
  ctx.fp8_gemms = x.fp8;
  const bool overlap = on_tp_group(x.tp_overlap, x.tp);
  const sim::ScheduleList& all = schedules(workload, x, overlap);
  sim::TuneOptions no_analytic;
  no_analytic.analytic = false;  // a pass reads the simulated times only
  no_analytic.describe = false;
  const sim::TuneResult r = sim::tune(all.schedules, lowered(workload, x, all, ctx), ctx, sim::predict_space(), no_analytic);
  if (r.ranked.empty()) throw InternalError("the tuner ranked no schedule of the " + workload + " workload");
  auto compute_of = [](const sim::Candidate& c) {
    LayerPass p;
    p.schedule = c.name;
    p.time_us = c.time_us;
    for (const sim::StageTiming& st : c.stages) {
      if (st.code == "MM") p.gemm_us += st.alone_us;
      if (st.code == "C" || st.code == "K") p.elementwise_us += st.alone_us;
      if (st.code == "FA") {
        p.gemm_us += st.alone_us;
        p.attention_us += st.alone_us;
      }
      p.flash_attention = p.flash_attention || st.code == "FA";
      p.fused_kernels = p.fused_kernels || st.code == "K";
    }
    return p;
  };
  // No TP group (tp 1): no collective runs; the candidates (unoverlapped:
  // their stages run one after another) cost their computation alone.
  return tuned_pass<LayerPass>(r.ranked, x.tp == 1, compute_of, [](LayerPass& p, double f) {
    p.gemm_us *= f;
    p.elementwise_us *= f;
    p.attention_us *= f;
  });
}

const LayerBlock& LayerBlockPricer::price(const LayerShape& x) {
  const bool sp = on_tp_group(x.sequence_parallel, x.tp);
  const Key key{x.micro_batch, x.sequence, x.heads,       x.head_dim,      x.ffn,      x.tp,
                int(x.dtype),  sp,         on_tp_group(x.tp_overlap, x.tp), int(x.family), hidden_of(x), kv_heads_of(x),
                x.fp8, x.flash_attention, x.fused_kernels,
                x.mla};
  if (const auto hit = cache_.find(key); hit != cache_.end()) return hit->second;
  const auto [fwd, bwd] = layer_programs(x);
  return cache_.emplace(key, LayerBlock{tune(fwd, x), tune(bwd, x)}).first->second;
}

}  // namespace coconet::step
