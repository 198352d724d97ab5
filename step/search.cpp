// Search over the layouts search.h lists, exact, in two passes. The first
// sizes every layout and prices each that fits with its pipeline's span
// bounded below (predict_step_bound: tens of microseconds; laying out a
// pipeline of a thousand micro-batches over 64 stages takes milliseconds);
// the second lays out the candidates in the order of their bounds and stops
// when the next bound cannot beat the slowest layout kept. A candidate is
// the handful of values a layout varies, not a copy of the spec.
#include "step/search.h"

#include <algorithm>

#include <fmt/core.h>

#include "model/error.h"

namespace coconet::step {

namespace {

std::vector<int> powers_of_two_up_to(int n) {
  std::vector<int> out;
  for (int v = 1; v <= n; v *= 2) out.push_back(v);
  return out;
}

struct Schedule {
  PipeSchedule kind;
  int virtual_stages;
};

std::vector<Schedule> schedules_for(const ModelSpec& base, int pp, const SearchOptions& o) {
  if (pp == 1) return {{PipeSchedule::one_f_one_b, 1}};
  if (!o.vary_schedule) return {{base.parallel.schedule, base.parallel.virtual_stages}};
  return {{PipeSchedule::gpipe, 1},
          {PipeSchedule::one_f_one_b, 1},
          {PipeSchedule::interleaved, 2},
          {PipeSchedule::interleaved, 4}};
}

std::vector<bool> sequence_parallel_choices(const ModelSpec& base, int tp, const SearchOptions& o) {
  if (tp == 1) return {false};
  if (!o.vary_sequence_parallel) return {base.parallel.sequence_parallel};
  return {false, true};
}

std::vector<bool> tp_overlap_choices(const ModelSpec& base, int tp, const SearchOptions& o) {
  if (tp == 1 || !o.vary_tp_overlap) return {base.parallel.tp_overlap};
  return {false, true};
}

// The MoE overlaps a layout runs with (spec.h Moe::a2a_overlap, needing a
// 1F1B schedule; Moe::shared_expert_overlap, needing shared experts). Each
// only hides all-to-all time (compose.cpp's overlapped_exposure_us never
// exceeds the all-to-all it is given) and holds no memory of its own, so
// the tuner's pick between on and off is always on: the search turns on
// each one the layout allows instead of pricing both ways. With
// vary_moe_overlap false: the file's.
struct MoeOverlaps {
  bool a2a = false, shared = false;
};

MoeOverlaps moe_overlaps(const ModelSpec& base, PipeSchedule schedule, const SearchOptions& o) {
  if (!base.moe.on() || !o.vary_moe_overlap) return {base.moe.a2a_overlap, base.moe.shared_expert_overlap};
  return {schedule != PipeSchedule::gpipe, base.moe.shared_experts > 0};
}

// What a layout sets in the spec.
struct Choice {
  int dp, tp, cp, pp, virtual_stages, zero, ep, etp;
  CpComm cp_comm;
  PipeSchedule schedule;
  Recompute recompute;
  std::int64_t micro_batch;
  bool fp8;         // the linear layers' GEMMs in FP8 (`dtype: fp8`)
  bool own_stages;  // the file's pipeline.layers_per_stage (its own pp and schedule); else balanced
  bool sequence_parallel, tp_overlap;
  MoeOverlaps moe_overlaps;
};

void apply(const Choice& c, const ModelSpec& base, ModelSpec& s) {
  auto& p = s.parallel;
  p.dp = c.dp;
  p.tp = c.tp;
  p.cp = c.cp;
  p.cp_comm = c.cp_comm;
  p.pp = c.pp;
  p.ep = c.ep;
  p.etp = c.etp;
  p.schedule = c.schedule;
  p.virtual_stages = c.virtual_stages;
  p.zero = c.zero;
  p.recompute = c.recompute;
  p.sequence_parallel = c.sequence_parallel;
  p.tp_overlap = c.tp_overlap;
  s.training.micro_batch = c.micro_batch;
  s.training.fp8 = c.fp8;
  s.moe.a2a_overlap = c.moe_overlaps.a2a;
  s.moe.shared_expert_overlap = c.moe_overlaps.shared;
  if (c.own_stages) p.layers_per_stage = base.parallel.layers_per_stage;
  else p.layers_per_stage.clear();
}

struct Candidate {
  double bound_us;  // predict_step_bound's step time: no less than predict_step's
  Choice choice;
};

struct Pricers {
  DpBlockPricer dp;
  LayerBlockPricer layers;
};

// Sizes `s` and, when it fits in memory, prices it with its pipeline bounded
// and keeps it as a candidate.
void try_layout(const Choice& c, const ModelSpec& s, const sim::Topology& t, Pricers& pricers, SearchResult& res,
                std::vector<Candidate>& out) {
  try {
    const Layout l = resolve_layout(s, t);
    ++res.evaluated;
    // The check before pricing assumes the attention keeping the least the
    // model allows; the priced report sizes the one the tuner chose.
    const SizedLayout sized{l, memory_per_gpu(s, l, t)};
    if (!sized.allowed_memory.fits()) {
      ++res.over_memory;
      return;
    }
    const StepReport r = predict_step_bound(s, sized, t, &pricers.dp, &pricers.layers);
    if (!r.memory.fits()) {
      ++res.over_memory;
      return;
    }
    out.push_back({r.step_us, c});
  } catch (const UserError& e) {
    // a layout the rules reject (e.g. interleaving with too few micro-batches)
    if (res.indivisible++ == 0) res.indivisible_example = e.what();
  }
}

// The `keep` fastest candidates, laid out: in the order of their bounds,
// until the next bound is no less than the slowest kept.
std::vector<StepReport> lay_out_best(std::vector<Candidate>& candidates, const ModelSpec& base,
                                     const sim::Topology& t, Pricers& pricers, std::size_t keep, int& laid_out) {
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.bound_us < b.bound_us; });
  const auto slower = [](const StepReport& a, const StepReport& b) { return a.step_us < b.step_us; };
  std::vector<StepReport> best;  // a max-heap on the step time: the slowest kept on top
  ModelSpec s = base;
  for (const Candidate& c : candidates) {
    if (keep == 0 || (best.size() == keep && c.bound_us >= best.front().step_us)) break;
    apply(c.choice, base, s);
    StepReport r = predict_step(s, t, &pricers.dp, &pricers.layers);
    ++laid_out;
    if (best.size() == keep) {
      if (r.step_us >= best.front().step_us) continue;
      std::pop_heap(best.begin(), best.end(), slower);
      best.pop_back();
    }
    best.push_back(std::move(r));
    std::push_heap(best.begin(), best.end(), slower);
  }
  std::sort_heap(best.begin(), best.end(), slower);
  return best;
}

struct Cp {
  int cp;
  CpComm comm;
};

std::vector<Cp> cp_choices(const ModelSpec& base, int tp, int gpus, const SearchOptions& o) {
  if (!o.vary_cp) return {{base.parallel.cp, base.parallel.cp_comm}};
  std::vector<Cp> out{{1, base.parallel.cp_comm}};
  for (int cp = 2; cp <= o.max_cp && std::int64_t(cp) * tp <= gpus; cp *= 2)
    if (base.model.sequence % (2 * std::int64_t(cp)) == 0 && gpus % (cp * tp) == 0)
      for (CpComm comm : {CpComm::ring, CpComm::allgather}) out.push_back({cp, comm});
  return out;
}

std::vector<int> zero_stages(const ModelSpec& base, const SearchOptions& o) {
  constexpr int kZeroStages = 4;  // 0-3 (Rajbhandari et al., SC'20)
  if (!o.vary_zero) return {base.parallel.zero};
  std::vector<int> out;
  for (int z = 0; z < kZeroStages; ++z) out.push_back(z);
  return out;
}

// FP8 GEMMs are a precision of a bf16 model (Transformer Engine keeps the
// values in bf16): tried both ways where the GPU has an FP8 rate.
std::vector<bool> fp8_choices(const ModelSpec& base, const sim::Topology& t, const SearchOptions& o) {
  const bool bf16_values = base.training.dtype == model::DType::bf16;
  if (!o.vary_precision || !bf16_values || !t.gpu.tflops_fp8) return {base.training.fp8};
  return {false, true};
}

struct Experts {
  int ep, etp;
};

// The expert layouts of a stage of tp x cp x dp ranks: ep (powers of two
// dividing the experts) x etp (powers of two dividing tp and the expert ffn)
// dividing the stage's ranks (Megatron-core's MoE parallel folding). A dense
// model, or the search told to keep them: the spec's.
std::vector<Experts> expert_choices(const ModelSpec& base, int tp, int stage_ranks, const SearchOptions& o) {
  if (!base.moe.on() || !o.vary_ep) return {{base.parallel.ep, base.parallel.etp}};
  std::vector<Experts> out;
  for (int etp = 1; etp <= tp; etp *= 2) {
    if (tp % etp != 0 || base.moe.expert_ffn % etp != 0) continue;
    for (int ep = 1; ep <= base.moe.experts && std::int64_t(ep) * etp <= stage_ranks; ep *= 2)
      if (base.moe.experts % ep == 0 && stage_ranks % (ep * etp) == 0) out.push_back({ep, etp});
  }
  return out;
}

void rule_out(SearchResult& res, std::string why) {
  if (res.indivisible++ == 0) res.indivisible_example = std::move(why);
}

}  // namespace

std::string why_none_fits(const SearchResult& r, const sim::Topology& t) {
  std::string out;
  if (r.evaluated > 0) {
    const double reserved = t.gpu.memory_GB > 0 ? t.gpu.reserved_GB.value_or(kDefaultReservedGB) : 0.0;
    out = fmt::format("{} of the {} layouts priced need more than the {:.1f} GB usable per GPU ({:.0f} GB of HBM less "
                      "{:.1f} GB reserved, gpu.reserved_GB)",
                      r.over_memory, r.evaluated, t.gpu.memory_GB - reserved, t.gpu.memory_GB, reserved);
  } else {
    out = "no layout could be priced";
  }
  if (r.indivisible > 0)
    out += fmt::format("; {} layouts ruled out by divisibility, the first because {}", r.indivisible,
                       r.indivisible_example);
  return out;
}

SearchResult search_layouts(const ModelSpec& base, const sim::Topology& t, const SearchOptions& o) {
  SearchResult res;
  const int gpus = t.total_gpus();
  const std::vector<int> tps = o.vary_tp ? powers_of_two_up_to(t.node.gpus) : std::vector<int>{base.parallel.tp};
  std::vector<Recompute> recomputes{base.parallel.recompute};
  if (o.vary_recompute) recomputes = {Recompute::none, Recompute::selective, Recompute::full};
  if (o.vary_recompute && base.model.latent()) recomputes.push_back(Recompute::mla_up_proj);
  if (o.vary_recompute && base.moe.on()) recomputes.push_back(Recompute::moe);
  const std::vector<int> zeros = zero_stages(base, o);
  Pricers pricers{DpBlockPricer(t), LayerBlockPricer(t)};
  const std::vector<bool> fp8s = fp8_choices(base, t, o);
  std::vector<Candidate> candidates;
  ModelSpec s = base;
  const auto tp_divides = [&](int tp) {
    return base.model.heads % tp == 0 && base.model.kv_heads % tp == 0 && gpus % tp == 0;
  };
  int pairs = 0, begun = 0;  // (tp, cp) pairs to search, and begun
  for (int tp : tps)
    if (tp_divides(tp)) pairs += int(cp_choices(base, tp, gpus, o).size());
  for (int tp : tps) {
    if (!tp_divides(tp)) {
      rule_out(res, fmt::format("tp = {} does not divide model.heads = {}, model.kv_heads = {} and the {} GPUs", tp,
                                base.model.heads, base.model.kv_heads, gpus));
      continue;
    }
    for (const Cp& cpc : cp_choices(base, tp, gpus, o)) {
      const int cp = cpc.cp;
      if (o.progress)
        o.progress(begun, pairs, fmt::format("tp {} cp {}{}, {} layouts priced so far", tp, cp,
                                             cp > 1 ? " (" + to_string(cpc.comm) + ")" : "", candidates.size()));
      ++begun;
      std::vector<int> pps{base.parallel.pp};
      if (o.vary_pp) {
        pps.clear();
        for (int pp = 1; pp <= base.model.layers && std::int64_t(pp) * tp * cp <= gpus; ++pp)
          if (gpus % (tp * cp * pp) == 0) pps.push_back(pp);
      }
      for (int pp : pps) {
        if (std::int64_t(pp) * tp * cp > gpus || gpus % (tp * cp * pp) != 0) continue;
        const int dp = gpus / (tp * cp * pp);
        const std::vector<int> mbs = o.vary_micro_batch ? powers_of_two_up_to(o.max_micro_batch)
                                                       : std::vector<int>{int(base.training.micro_batch)};
        for (int mb : mbs) {
          if (base.training.global_batch % (std::int64_t(mb) * dp) != 0) {
            rule_out(res, fmt::format("training.global_batch = {} is not a multiple of micro_batch x dp = {} x {}",
                                      base.training.global_batch, mb, dp));
            continue;
          }
          for (const Schedule& sch : schedules_for(base, pp, o)) {
            // The file's stage list belongs to its own pp and virtual stages; others are balanced.
            const bool own = pp == base.parallel.pp && sch.kind == base.parallel.schedule &&
                             sch.virtual_stages == base.parallel.virtual_stages;
            for (const Experts& ex : expert_choices(base, tp, tp * cp * dp, o))
              for (Recompute rc : recomputes)
                for (int zero : zeros)
                  for (bool sp : sequence_parallel_choices(base, tp, o))
                    for (bool overlap : tp_overlap_choices(base, tp, o))
                      for (bool fp8 : fp8s) {
                        const Choice c{dp,       tp, cp, pp,  sch.virtual_stages, zero,   ex.ep, ex.etp, cpc.comm,
                                       sch.kind, rc, mb, fp8, own,                sp,     overlap,
                                       moe_overlaps(base, sch.kind, o)};
                        apply(c, base, s);
                        try_layout(c, s, t, pricers, res, candidates);
                      }
          }
        }
      }
    }
  }
  res.priced = int(candidates.size());
  if (o.progress)
    o.progress(pairs, pairs, fmt::format("laying out the fastest of the {} layouts that fit", candidates.size()));
  res.best = lay_out_best(candidates, base, t, pricers, std::size_t(std::max(0, o.keep)), res.laid_out);
  res.tuned_blocks = pricers.dp.tuned();
  res.tuned_layers = pricers.layers.tuned();
  return res;
}

}  // namespace coconet::step
