// The MoE programs through the tuner (see moe_block.h).
#include "step/moe_block.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "sim/collective.h"
#include "sim/context.h"
#include "sim/tuner.h"
#include "step/tuned_pass.h"

namespace coconet::step {

namespace {

constexpr const char* kMoeFwd = "moe_layer_fwd";
constexpr const char* kMoeBwd = "moe_layer_bwd";

bool unoverlapped(const model::Schedule& s) {
  return s.overlaps.empty() &&
         std::none_of(s.stages.begin(), s.stages.end(),
                      [](const model::Stage& st) { return st.kind == model::StageKind::fused; });
}

model::Program at_dtype(model::Program p, model::DType d) {
  for (model::TensorDecl& in : p.inputs) in.type.dtype = d;
  model::check(p);
  return p;
}

}  // namespace

MoeShape step_moe_shape(const ModelSpec& s, const Layout& l) {
  const Moe& m = s.moe;
  MoeShape x;
  // Megatron-core runs an MoE layer beside tensor parallelism with sequence
  // parallelism (each TP rank its s / tp tokens: megatron/training/arguments.py
  // asserts sequence_parallel with tp and experts); an expert-TP group of etp
  // ranks gathers its ranks' tokens.
  const std::int64_t per_rank =
      std::max<std::int64_t>(1, s.training.micro_batch * (s.model.sequence / l.cp) / l.tp) * l.etp;
  x.tokens = per_rank * l.ep;
  x.hidden = s.model.hidden;
  x.experts = m.experts;
  x.top_k = m.top_k;
  const double mean = double(x.tokens) * double(m.top_k) / double(m.experts);
  x.slots = std::max<std::int64_t>(1, std::int64_t(std::ceil(mean * m.hottest_share())));
  x.ffn = m.expert_ffn / l.etp;
  x.ep = l.ep;
  x.etp = l.etp;
  x.dtype = s.training.dtype;
  x.fp8 = s.training.fp8;
  x.deepep = m.dispatcher == Dispatcher::deepep;
  return x;
}

model::Bindings moe_bindings(const MoeShape& x) {
  return {{"T", x.tokens}, {"H", x.hidden}, {"E", x.experts},
          {"K", x.top_k},  {"S", x.slots},  {"F", x.ffn}};
}

sim::Topology deepep_topology(const sim::Topology& t) {
  sim::Topology d = t;
  d.nccl.alltoall_efficiency = {};
  return d;
}

MoeBlockPricer::MoeBlockPricer(const sim::Topology& t)
    : topology_(t), deepep_topology_(deepep_topology(t)), deepep_collectives_(deepep_topology_) {}

const sim::ScheduleList& MoeBlockPricer::schedules(const std::string& workload, model::DType d) {
  const auto key = std::make_pair(workload, int(d));
  auto it = programs_.find(key);
  if (it == programs_.end()) {
    std::vector<model::Schedule> ss;
    const model::Program p = at_dtype(model::load_program(model::resolve_workload(workload)), d);
    for (model::Schedule& s : model::enumerate_schedules(p))
      if (unoverlapped(s)) ss.push_back(std::move(s));
    if (ss.empty())
      throw InternalError("the " + workload + " workload enumerates no unoverlapped schedule");
    it = programs_.emplace(key, sim::share_programs(std::move(ss))).first;
  }
  return it->second;
}

MoePass MoeBlockPricer::tune(const std::string& workload, const MoeShape& x) {
  const sim::Topology& t = x.deepep ? deepep_topology_ : topology_;
  sim::Context ctx{t, x.ep, moe_bindings(x), std::nullopt};
  ctx.where = sim::place_strided(t, x.ep, x.etp);
  ctx.fused_kernels = true;
  ctx.fp8_gemms = x.fp8;
  sim::TuneOptions times_only;  // a pass reads the simulated times only
  times_only.analytic = false;
  times_only.describe = false;
  const sim::ScheduleList& all = schedules(workload, x.dtype);
  std::vector<plan::StepPlan> lowered = sim::lower_unchunked(all, ctx);
  const sim::TuneResult r = sim::tune(all.schedules, lowered, ctx, sim::predict_space(), times_only);
  if (r.ranked.empty())
    throw InternalError("the tuner ranked no schedule of the " + workload + " workload");
  const auto compute_of = [](const sim::Candidate& c) {
    MoePass p;
    p.schedule = c.name;
    p.time_us = c.time_us;
    for (const sim::StageTiming& st : c.stages) {
      if (st.code == "MM") p.gemm_us += st.alone_us;
      if (st.code == "C" || st.code == "K") p.elementwise_us += st.alone_us;
    }
    return p;
  };
  // One rank (ep 1): no all-to-all runs; a schedule costs its computation.
  return tuned_pass<MoePass>(r.ranked, x.ep == 1, compute_of, [](MoePass& p, double f) {
    p.gemm_us *= f;
    p.elementwise_us *= f;
  });
}

const MoeBlock& MoeBlockPricer::price(const MoeShape& x) {
  const auto key = x.key();
  if (const auto hit = cache_.find(key); hit != cache_.end()) return hit->second;
  return cache_.emplace(key, MoeBlock{tune(kMoeFwd, x), tune(kMoeBwd, x)}).first->second;
}

}  // namespace coconet::step
