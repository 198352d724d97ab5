// Exhaustive search over the layouts search.h lists; each is priced by
// predict_step (microseconds each), so no pruning is needed at cluster sizes
// of thousands of GPUs.
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

// Sizes `s` and, when it fits in memory, prices it and keeps it in `fits`.
void try_layout(const ModelSpec& s, const sim::Topology& t, DpBlockPricer& pricer, LayerBlockPricer& layers,
                SearchResult& res, std::vector<StepReport>& fits) {
  StepReport r;
  try {
    const Layout l = resolve_layout(s, t);
    ++res.evaluated;
    if (!memory_per_gpu(s, l, t).fits()) {
      ++res.over_memory;
      return;
    }
    r = predict_step(s, t, &pricer, &layers);
  } catch (const UserError& e) {
    // a layout the rules reject (e.g. interleaving with too few micro-batches)
    if (res.indivisible++ == 0) res.indivisible_example = e.what();
    return;
  }
  fits.push_back(std::move(r));
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
  const std::vector<int> zeros = zero_stages(base, o);
  DpBlockPricer pricer(t);
  LayerBlockPricer layers(t);
  std::vector<StepReport> fits;
  for (int tp : tps) {
    if (base.model.heads % tp != 0 || base.model.kv_heads % tp != 0 || gpus % tp != 0) {
      rule_out(res, fmt::format("tp = {} does not divide model.heads = {}, model.kv_heads = {} and the {} GPUs", tp,
                                base.model.heads, base.model.kv_heads, gpus));
      continue;
    }
    for (const Cp& cpc : cp_choices(base, tp, gpus, o)) {
    const int cp = cpc.cp;
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
        ModelSpec s = base;
        s.parallel.dp = dp;
        s.parallel.tp = tp;
        s.parallel.cp = cp;
        s.parallel.cp_comm = cpc.comm;
        s.parallel.pp = pp;
        s.training.micro_batch = mb;
        for (const Schedule& sch : schedules_for(base, pp, o)) {
          s.parallel.schedule = sch.kind;
          s.parallel.virtual_stages = sch.virtual_stages;
          // The file's stage list belongs to its own pp and virtual stages; others are balanced.
          const bool own = pp == base.parallel.pp && sch.kind == base.parallel.schedule &&
                           sch.virtual_stages == base.parallel.virtual_stages;
          s.parallel.layers_per_stage = own ? base.parallel.layers_per_stage : std::vector<int>{};
          for (Recompute rc : recomputes) {
            s.parallel.recompute = rc;
            for (int zero : zeros) {
              s.parallel.zero = zero;
              for (bool sp : sequence_parallel_choices(base, tp, o)) {
                s.parallel.sequence_parallel = sp;
                for (bool overlap : tp_overlap_choices(base, tp, o)) {
                  s.parallel.tp_overlap = overlap;
                  try_layout(s, t, pricer, layers, res, fits);
                }
              }
            }
          }
        }
      }
    }
  }
  }
  res.tuned_blocks = pricer.tuned();
  res.tuned_layers = layers.tuned();
  const auto keep = std::min<std::size_t>(fits.size(), std::size_t(std::max(0, o.keep)));
  std::partial_sort(fits.begin(), fits.begin() + std::ptrdiff_t(keep), fits.end(),
                    [](const StepReport& a, const StepReport& b) { return a.step_us < b.step_us; });
  fits.resize(keep);
  res.best = std::move(fits);
  return res;
}

}  // namespace coconet::step
