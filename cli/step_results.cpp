// See step_results.h.
#include "cli/step_results.h"

#include <fmt/core.h>

#include "cli/json_out.h"
#include "model/set_flag.h"
#include "model/error.h"
#include "step/search.h"

namespace coconet::cli {

namespace {

std::string gemm_precision(const step::KernelChoices& k) {
  return k.fp8_gemms ? "fp8" : model::to_string(k.dtype);
}

// "forward and backward", "forward only", "backward only" or "" (neither).
std::string passes(bool fwd, bool bwd) {
  if (fwd && bwd) return "forward and backward";
  if (fwd) return "forward only";
  return bwd ? "backward only" : "";
}

// What the layer's all-to-alls run beside: the other micro-batch's pass
// (moe.a2a_overlap, 1F1B schedules), the shared experts
// (moe.shared_expert_overlap), or nothing.
std::string moe_overlap_label(const step::Moe& m, const step::Parallelism& p) {
  if (m.a2a_overlap && p.schedule != step::PipeSchedule::gpipe) return "1F1B";
  return m.shared_expert_overlap ? "shared experts" : "off";
}

}  // namespace

step::KernelChoices kernels_of(const step::StepReport& r, step::LayerBlockPricer& layers) {
  const step::LayerShape x = step::step_layer_shape(r.spec, r.layout);
  return step::kernel_choices_of(layers.price(x), x);
}

std::string kernels_label(const step::KernelChoices& k) {
  const std::string flash = passes(k.flash_attention_fwd, k.flash_attention_bwd);
  const std::string fused = passes(k.fused_kernels_fwd, k.fused_kernels_bwd);
  return fmt::format(
      "attention {}; element-wise {}; GEMMs {}",
      flash.empty() ? "materialised (s x s scores in memory)" : "flash (" + flash + ")",
      fused.empty() ? "one kernel per statement" : "fused kernels (" + fused + ")",
      k.fp8_gemms ? fmt::format("fp8 (linear layers, with their casts; attention {})", model::to_string(k.dtype))
                  : model::to_string(k.dtype));
}

nlohmann::json layout_json(const step::StepReport& r, const step::KernelChoices& k) {
  const auto& p = r.spec.parallel;
  const auto& b = r.breakdown;
  const auto& m = r.memory;
  return {
      {"dp", r.layout.dp},
      {"tp", r.layout.tp},
      {"cp", r.layout.cp},
      {"cp_comm", step::to_string(p.cp_comm)},
      {"pp", r.layout.pp},
      {"layers_per_stage", r.layout.chunk_layers},
      {"slowest_stage", r.slowest_stage},
      {"micro_batch", r.spec.training.micro_batch},
      {"micro_batches", r.layout.micro_batches},
      {"schedule", step::to_string(p.schedule)},
      {"virtual_stages", r.layout.virtual_stages},
      {"zero", p.zero},
      {"recompute", step::to_string(p.recompute)},
      {"sequence_parallel", step::sequence_parallel_on(p, r.layout)},
      {"step_ms", r.step_us / kUsPerMs},
      {"breakdown_ms",
       {{"compute", b.compute_us / kUsPerMs},
        {"tp_comm", b.tp_comm_us / kUsPerMs},
        {"cp_comm", b.cp_comm_us / kUsPerMs},
        {"ep_comm", b.ep_comm_us / kUsPerMs},
        {"pp_bubble", b.pp_bubble_us / kUsPerMs},
        {"pp_p2p", b.pp_p2p_us / kUsPerMs},
        {"dp_comm", b.dp_comm_us / kUsPerMs},
        {"optimizer", b.optimizer_us / kUsPerMs}}},
      {"dp_schedule", r.dp_schedule},
      {"tp_overlap", step::tp_overlap_on(p, r.layout)},
      {"layer_fwd_schedule", r.layer_fwd_schedule},
      {"layer_bwd_schedule", r.layer_bwd_schedule},
      {"moe_fwd_schedule", r.moe_fwd_schedule},
      {"moe_bwd_schedule", r.moe_bwd_schedule},
      {"moe_layer_us",
       {{"fwd_gemm", r.moe_layer.fwd_gemm_us},
        {"fwd_elementwise", r.moe_layer.fwd_elementwise_us},
        {"fwd_tp", r.moe_layer.fwd_tp_us},
        {"fwd_a2a", r.moe_layer.fwd_a2a_us},
        {"bwd_gemm", r.moe_layer.bwd_gemm_us},
        {"bwd_elementwise", r.moe_layer.bwd_elementwise_us},
        {"bwd_tp", r.moe_layer.bwd_tp_us},
        {"bwd_a2a", r.moe_layer.bwd_a2a_us},
        {"recompute", r.moe_layer.recompute_us}}},
      {"ep", r.layout.ep},
      {"etp", r.layout.etp},
      {"expert_dp", r.layout.edp},
      {"moe_a2a_overlap", r.spec.moe.a2a_overlap},
      {"moe_shared_expert_overlap", r.spec.moe.shared_expert_overlap},
      {"kernels",
       {{"flash_attention_fwd", k.flash_attention_fwd},
        {"flash_attention_bwd", k.flash_attention_bwd},
        {"fused_kernels_fwd", k.fused_kernels_fwd},
        {"fused_kernels_bwd", k.fused_kernels_bwd},
        {"gemm_precision", gemm_precision(k)}}},
      {"layer_us",
       {{"fwd_gemm", r.layer.fwd_gemm_us},
        {"fwd_elementwise", r.layer.fwd_elementwise_us},
        {"fwd_tp", r.layer.fwd_tp_us},
        {"bwd_gemm", r.layer.bwd_gemm_us},
        {"bwd_elementwise", r.layer.bwd_elementwise_us},
        {"bwd_tp", r.layer.bwd_tp_us},
        {"recompute", r.layer.recompute_us}}},
      {"model_tflops_per_gpu", r.model_tflops_per_gpu},
      {"hardware_tflops_per_gpu", r.hardware_tflops_per_gpu},
      {"eq3_tflops_per_gpu", r.eq3_tflops_per_gpu},
      {"mfu", r.peak_tflops > 0 ? nlohmann::json(r.mfu) : nlohmann::json(nullptr)},
      {"peak_tflops", r.peak_tflops},
      {"tokens_per_s", r.tokens_per_s},
      {"memory_GB",
       {{"weights", m.weights_GB},
        {"gradients", m.gradients_GB},
        {"optimizer", m.optimizer_GB},
        {"activations", m.activations_GB},
        {"total", m.total_GB()},
        {"capacity", m.capacity_GB},
        {"reserved", m.reserved_GB},
        {"fits", m.fits()}}},
  };
}


std::string layout_label(const step::StepReport& r) {
  const auto& p = r.spec.parallel;
  std::string sched = step::to_string(p.schedule);
  if (r.layout.virtual_stages > 1) sched += fmt::format(" v{}", r.layout.virtual_stages);
  std::string cp =
      r.layout.cp > 1 ? fmt::format(" x cp {} ({})", r.layout.cp, step::to_string(p.cp_comm)) : std::string();
  if (r.spec.moe.on())
    cp += fmt::format(" (experts: ep {} x etp {} x expert dp {}, all-to-all overlap {})", r.layout.ep, r.layout.etp,
                      r.layout.edp, moe_overlap_label(r.spec.moe, p));
  return fmt::format(
      "dp {} x tp {}{} x pp {}, {}, {} micro-batches of {}, ZeRO {}, recompute {}, sequence parallel {}, TP overlap {}, "
      "GEMMs {}",
      r.layout.dp, r.layout.tp, cp, r.layout.pp, r.layout.pp > 1 ? sched : "no pipeline", r.layout.micro_batches,
      r.spec.training.micro_batch, p.zero, step::to_string(p.recompute),
      step::sequence_parallel_on(p, r.layout) ? "on" : "off", step::tp_overlap_on(p, r.layout) ? "on" : "off",
      r.spec.training.fp8 ? std::string("fp8") : model::to_string(r.spec.training.dtype));
}

StepOutcome run_step(const StepRequest& a) {
  if (a.search_tp_overlap && !a.search) throw UserError("--search-tp-overlap needs --search");
  step::Overrides model_sets;
  sim::Overrides topo_sets;
  for (const auto& s : a.sets) {
    auto kv = model::parse_assignment(s);
    (step::is_model_key(kv.first) ? model_sets : topo_sets).push_back(std::move(kv));
  }
  if (a.nodes) topo_sets.emplace_back("nodes", std::to_string(*a.nodes));
  StepOutcome o{step::load_model(a.model, model_sets), sim::load_topology(a.topology, topo_sets), {}, a.search};
  if (!a.search) {
    o.reports.push_back(step::predict_step(o.spec, o.topology));
    o.over_memory = o.reports.front().memory.fits() ? 0 : 1;
    return o;
  }
  step::SearchOptions opts;
  opts.keep = a.top;
  opts.vary_tp_overlap = a.search_tp_overlap;
  opts.progress = a.search_progress;
  step::SearchResult r = step::search_layouts(o.spec, o.topology, opts);
  if (r.best.empty())
    throw UserError(fmt::format("{} on {} x {} GPUs: no layout fits: {}", o.spec.name, o.topology.nodes,
                                o.topology.node.gpus, step::why_none_fits(r, o.topology)));
  o.evaluated = r.evaluated;
  o.over_memory = r.over_memory;
  o.laid_out = r.laid_out;
  o.reports = std::move(r.best);
  return o;
}

nlohmann::json step_json(const StepOutcome& o) {
  const sim::Topology& t = o.topology;
  step::LayerBlockPricer layers(t);
  nlohmann::json layouts = nlohmann::json::array();
  for (const auto& r : o.reports) layouts.push_back(layout_json(r, kernels_of(r, layers)));
  return tagged("step", {{"model", o.spec.name},
                         {"topology", t.name},
                         {"nodes", t.nodes},
                         {"gpus", t.total_gpus()},
                         {"search", o.search},
                         {"evaluated", o.evaluated},
                         {"over_memory", o.over_memory},
                         {"layouts", layouts}});
}

std::vector<StepSide> compare_steps(const StepRequest& base, const std::vector<std::string>& topologies,
                                    const std::vector<int>& nodes) {
  std::vector<std::string> ts = topologies;
  if (ts.empty()) ts.push_back(base.topology);
  std::vector<std::optional<int>> ns(nodes.begin(), nodes.end());
  if (ns.empty()) ns.push_back(base.nodes);
  std::vector<StepSide> out;
  for (const auto& t : ts)
    for (const auto& n : ns) {
      StepRequest r = base;
      r.topology = t;
      r.nodes = n;
      r.top = 1;
      StepSide side{nodes.size() > 1 ? fmt::format("{} x{}", t, *n) : t, run_step(r)};
      out.push_back(std::move(side));
    }
  if (out.size() < 2)
    throw UserError("compare needs two or more sides: repeat --topology (e.g. --topology dgx-h100 --topology "
                    "dgx-a100) or --nodes (e.g. --nodes 16 --nodes 32)");
  return out;
}

std::string gpu_count_note(const std::vector<StepSide>& sides) {
  const int first = sides.front().outcome.topology.total_gpus();
  for (const auto& s : sides)
    if (s.outcome.topology.total_gpus() != first) {
      std::string counts;
      for (const auto& x : sides)
        counts += fmt::format("{}{}: {} GPUs", counts.empty() ? "" : ", ", x.name, x.outcome.topology.total_gpus());
      return fmt::format("the sides have different GPU counts ({}): the ratio compares whole steps; the "
                         "TFLOP/s and MFU columns compare per GPU",
                         counts);
    }
  return "";
}

nlohmann::json compare_steps_json(const std::vector<StepSide>& sides) {
  const double reference = sides.front().outcome.reports.front().step_us;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : sides) {
    const step::StepReport& r = s.outcome.reports.front();
    const sim::Topology& t = s.outcome.topology;
    out.push_back({{"side", s.name},
                   {"topology", t.name},
                   {"nodes", t.nodes},
                   {"gpus", t.total_gpus()},
                   {"layout", layout_label(r)},
                   {"step_ms", r.step_us / kUsPerMs},
                   {"ratio", r.step_us / reference},
                   {"tokens_per_s", r.tokens_per_s},
                   {"model_tflops_per_gpu", r.model_tflops_per_gpu},
                   {"mfu", r.peak_tflops > 0 ? nlohmann::json(r.mfu) : nlohmann::json(nullptr)},
                   {"memory_GB", r.memory.total_GB()},
                   {"fits", r.memory.fits()}});
  }
  const std::string note = gpu_count_note(sides);
  return tagged("compare_steps", {{"model", sides.front().outcome.spec.name},
                                  {"search", sides.front().outcome.search},
                                  {"reference", sides.front().name},
                                  {"note", note.empty() ? nlohmann::json(nullptr) : nlohmann::json(note)},
                                  {"sides", out}});
}

}  // namespace coconet::cli
