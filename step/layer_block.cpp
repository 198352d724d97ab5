// The layer programs through the tuner (see layer_block.h).
#include "step/layer_block.h"

#include <algorithm>
#include <variant>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "sim/context.h"
#include "sim/tuner.h"
#include "step/spec.h"

namespace coconet::step {

namespace {

constexpr const char* kForward = "megatron_layer_fwd";
constexpr const char* kBackward = "megatron_layer_bwd";
constexpr const char* kForwardSp = "megatron_layer_sp_fwd";
constexpr const char* kBackwardSp = "megatron_layer_sp_bwd";

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

}  // namespace

LayerBlockPricer::LayerBlockPricer(const sim::Topology& t) : topology_(t) {}

const std::vector<model::Schedule>& LayerBlockPricer::schedules(const std::string& workload, model::DType d,
                                                                bool overlap) {
  const auto key = std::make_pair(workload, int(d));
  auto it = programs_.find(key);
  if (it == programs_.end()) {
    Programs ps;
    const model::Program p = at_dtype(model::load_program(model::resolve_workload(workload)), d);
    for (model::Schedule& s : model::enumerate_schedules(p)) {
      if (unoverlapped(s)) ps.unoverlapped.push_back(s);
      ps.all.push_back(std::move(s));
    }
    if (ps.unoverlapped.empty()) throw InternalError("the " + workload + " workload enumerates no unoverlapped schedule");
    it = programs_.emplace(key, std::move(ps)).first;
  }
  return overlap ? it->second.all : it->second.unoverlapped;
}

LayerPass LayerBlockPricer::tune(const std::string& workload, const LayerShape& x) {
  const model::Bindings sizes{{"B", x.micro_batch}, {"S", x.sequence}, {"NH", x.heads},
                              {"D", x.head_dim},    {"F", x.ffn}};
  const sim::Context ctx{topology_, x.tp, sizes, std::nullopt};
  const sim::TuneResult r = sim::tune(schedules(workload, x.dtype, x.tp_overlap), ctx, sim::predict_space());
  if (r.ranked.empty()) throw InternalError("the tuner ranked no schedule of the " + workload + " workload");
  const sim::Candidate& best = r.ranked.front();
  LayerPass p;
  p.schedule = best.name;
  p.time_us = best.time_us;
  for (const sim::StageTiming& st : best.stages) {
    if (st.code == "MM") p.gemm_us += st.alone_us;
    if (st.code == "C") p.elementwise_us += st.alone_us;
  }
  // Compute stages that ran beside a collective count as hidden, not twice.
  const double compute = p.gemm_us + p.elementwise_us;
  if (compute > p.time_us && compute > 0) {
    p.gemm_us *= p.time_us / compute;
    p.elementwise_us *= p.time_us / compute;
  }
  return p;
}

LayerBlock LayerBlockPricer::price(const LayerShape& x) {
  const bool sp = on_tp_group(x.sequence_parallel, x.tp);
  const Key key{x.micro_batch, x.sequence, x.heads, x.head_dim, x.ffn, x.tp, int(x.dtype), sp, x.tp_overlap};
  if (const auto hit = cache_.find(key); hit != cache_.end()) return hit->second;
  const LayerBlock b{tune(sp ? kForwardSp : kForward, x), tune(sp ? kBackwardSp : kBackward, x)};
  cache_.emplace(key, b);
  return b;
}

}  // namespace coconet::step
