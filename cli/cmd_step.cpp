// coconet step: one training step of a model (models/*.yaml) on a cluster:
// step time, where it goes, model TFLOP/s per GPU, MFU and memory per GPU;
// with --search, the best parallel layouts that fit in memory.
#include <memory>
#include <optional>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "model/assign.h"
#include "model/error.h"
#include "model/safe_write.h"
#include "sim/topology.h"
#include "step/compose.h"
#include "step/search.h"
#include "step/trace.h"

namespace coconet::cli {

namespace {

struct Args {
  std::string model;
  std::string topology = "dgx-h100";
  std::optional<int> nodes;
  std::vector<std::string> sets;
  Format format = Format::table;
  bool search = false;
  bool search_tp_overlap = false;
  int top = 5;
  std::optional<std::string> trace;  // given, even empty (an error), or not
};

constexpr double kUsPerMs = 1e3;

// The kernel choices of a report's layer (step/layer_block.h): its layer
// priced again by `layers`, which holds it already when it priced the step.
step::KernelChoices kernels_of(const step::StepReport& r, step::LayerBlockPricer& layers) {
  const step::LayerShape x = step::step_layer_shape(r.spec, r.layout);
  return step::kernel_choices_of(layers.price(x), x);
}

std::string gemm_precision(const step::KernelChoices& k) {
  return k.fp8_gemms ? "fp8" : model::to_string(k.dtype);
}

// "forward and backward", "forward only", "backward only" or "" (neither).
std::string passes(bool fwd, bool bwd) {
  if (fwd && bwd) return "forward and backward";
  if (fwd) return "forward only";
  return bwd ? "backward only" : "";
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
        {"pp_bubble", b.pp_bubble_us / kUsPerMs},
        {"pp_p2p", b.pp_p2p_us / kUsPerMs},
        {"dp_comm", b.dp_comm_us / kUsPerMs},
        {"optimizer", b.optimizer_us / kUsPerMs}}},
      {"dp_schedule", r.dp_schedule},
      {"tp_overlap", step::tp_overlap_on(p, r.layout)},
      {"layer_fwd_schedule", r.layer_fwd_schedule},
      {"layer_bwd_schedule", r.layer_bwd_schedule},
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
  const std::string cp =
      r.layout.cp > 1 ? fmt::format(" x cp {} ({})", r.layout.cp, step::to_string(p.cp_comm)) : std::string();
  return fmt::format(
      "dp {} x tp {}{} x pp {}, {}, {} micro-batches of {}, ZeRO {}, recompute {}, sequence parallel {}, TP overlap {}",
      r.layout.dp, r.layout.tp, cp, r.layout.pp, r.layout.pp > 1 ? sched : "no pipeline", r.layout.micro_batches,
      r.spec.training.micro_batch, p.zero, step::to_string(p.recompute),
      step::sequence_parallel_on(p, r.layout) ? "on" : "off", step::tp_overlap_on(p, r.layout) ? "on" : "off");
}

// The layouts, one row each; in CSV with the breakdown's columns too (breakdown_ms of the JSON, in ms).
Table layouts_table(const std::vector<step::StepReport>& rs, Format f) {
  const bool breakdown = f == Format::csv;
  Table t{{"dp", "tp", "cp", "pp", "micro_batch", "schedule", "virtual_stages", "zero", "recompute", "sequence_parallel",
           "tp_overlap", "step_ms"}};
  if (breakdown)
    for (const char* c : {"compute_ms", "tp_comm_ms", "cp_comm_ms", "pp_bubble_ms", "pp_p2p_ms", "dp_comm_ms",
                          "optimizer_ms"})
      t.columns.emplace_back(c);
  for (const char* c : {"model_tflops_per_gpu", "hardware_tflops_per_gpu", "eq3_tflops_per_gpu", "mfu", "memory_GB",
                        "fits"})
    t.columns.emplace_back(c);
  for (const auto& r : rs) {
    std::vector<Cell> row{std::int64_t(r.layout.dp), std::int64_t(r.layout.tp), std::int64_t(r.layout.cp),
                          std::int64_t(r.layout.pp), r.spec.training.micro_batch,
                          step::to_string(r.spec.parallel.schedule), std::int64_t(r.layout.virtual_stages),
                          std::int64_t(r.spec.parallel.zero), step::to_string(r.spec.parallel.recompute),
                          step::sequence_parallel_on(r.spec.parallel, r.layout),
                          step::tp_overlap_on(r.spec.parallel, r.layout), r.step_us / kUsPerMs};
    const auto& b = r.breakdown;
    if (breakdown)
      for (const double us : {b.compute_us, b.tp_comm_us, b.cp_comm_us, b.pp_bubble_us, b.pp_p2p_us, b.dp_comm_us,
                              b.optimizer_us})
        row.emplace_back(us / kUsPerMs);
    for (Cell c : std::vector<Cell>{r.model_tflops_per_gpu, r.hardware_tflops_per_gpu, r.eq3_tflops_per_gpu, r.mfu,
                                    r.memory.total_GB(), r.memory.fits()})
      row.push_back(std::move(c));
    t.add(std::move(row));
  }
  return t;
}

void print_detail(const step::StepReport& r, const sim::Topology& t, const step::KernelChoices& k) {
  const auto& b = r.breakdown;
  const auto& m = r.memory;
  const double step = r.step_us;
  auto line = [&](const char* what, double us) {
    fmt::print("  {:<26} {:>10.1f} ms  {:>5.1f}%\n", what, us / kUsPerMs, 100.0 * us / step);
  };
  fmt::print("# {} on {}: {} nodes x {} GPUs = {} GPUs, predicted\n", r.spec.name, t.name, t.nodes, t.node.gpus,
             r.layout.gpus);
  fmt::print("# {}\n", layout_label(r));
  const auto& md = r.spec.model;
  const auto programs = step::layer_programs(step::LayerShape{
      .tp = r.layout.tp, .sequence_parallel = step::sequence_parallel_on(r.spec.parallel, r.layout),
      .family = md.family()});
  fmt::print("# {} layers, hidden {}, {} heads ({} K/V) of {}, ffn {} {}, {}, embeddings {}; layer programs {} and {}\n",
             md.layers, md.hidden, md.heads, md.kv_heads, md.head_dim, md.ffn, step::to_string(md.ffn_type),
             step::to_string(md.norm), md.tied_embeddings ? "tied" : "untied", programs.first, programs.second);
  fmt::print("# kernels: {}\n", kernels_label(k));
  fmt::print("step time                    {:>10.1f} ms\n", step / kUsPerMs);
  line("compute", b.compute_us);
  line("exposed TP communication", b.tp_comm_us);
  if (r.layout.cp > 1) line("exposed CP K/V exchange", b.cp_comm_us);
  line("pipeline bubble", b.pp_bubble_us);
  line("pipeline sends", b.pp_p2p_us);
  line("exposed DP communication", b.dp_comm_us);
  fmt::print("    and the optimizer: each {} MB bucket's reduction + Adam is the adam workload's {} (the tuner's "
             "best)\n",
             r.spec.parallel.bucket_MB, r.dp_schedule);
  if (r.layout.pp > 1)
    fmt::print("    stages' layers {} (stage {} sets the pace)\n", fmt::join(r.layout.chunk_layers, " "),
               r.slowest_stage);
  fmt::print("{:<29}{:>10.5g}     (no recomputation; 2 FLOPs per multiply-add, GEMMs only, non-causal "
             "attention)\n", "model TFLOP/s per GPU", r.model_tflops_per_gpu);
  fmt::print("{:<29}{:>10.5g}     (with recompute {})\n", "hardware TFLOP/s per GPU", r.hardware_tflops_per_gpu,
             step::to_string(r.spec.parallel.recompute));
  fmt::print("{:<29}{:>10.5g}     (SC'21: full recomputation counted whatever is run)\n",
             "Megatron-LM eq. 3 TFLOP/s", r.eq3_tflops_per_gpu);
  if (r.peak_tflops > 0)
    fmt::print("MFU                          {:>10.1f} %   (model TFLOP/s of {:.0f} TFLOP/s dense {})\n", 100 * r.mfu,
               r.peak_tflops, model::to_string(r.spec.training.dtype));
  else
    fmt::print("MFU                                 n/a   ({}'s rates are calibrated achieved rates, not a dense peak)\n",
               t.name);
  fmt::print("tokens per second            {:>10.0f}\n", r.tokens_per_s);
  fmt::print("memory per GPU               {:>10.1f} GB  of {} ({})\n", m.total_GB(),
             m.capacity_GB > 0
                 ? fmt::format("{:.1f} GB usable: {:.0f} GB less {:.1f} reserved", m.usable_GB(), m.capacity_GB,
                               m.reserved_GB)
                 : std::string("unknown HBM"),
             m.fits() ? "fits" : "DOES NOT FIT");
  fmt::print("  weights {:.1f}, gradients {:.1f}, optimizer {:.1f}, activations {:.1f} GB\n", m.weights_GB,
             m.gradients_GB, m.optimizer_GB, m.activations_GB);
  fmt::print("layer, one micro-batch       fwd {:.0f} us (GEMM {:.0f}, element-wise {:.0f}, TP {:.0f}), bwd {:.0f} us"
             " (GEMM {:.0f}, element-wise {:.0f}, TP {:.0f}, recompute {:.0f})\n",
             r.layer.fwd_us(), r.layer.fwd_gemm_us, r.layer.fwd_elementwise_us, r.layer.fwd_tp_us, r.layer.bwd_us(),
             r.layer.bwd_gemm_us, r.layer.bwd_elementwise_us, r.layer.bwd_tp_us, r.layer.recompute_us);
  fmt::print("  the tuner's best schedules of the layer programs (TP overlap {}{}):\n    forward  {}\n    backward {}\n",
             step::tp_overlap_on(r.spec.parallel, r.layout) ? "allowed" : "off",
             r.layout.tp == 1 ? "; tp 1: their collectives are on one rank and cost nothing" : "",
             r.layer_fwd_schedule, r.layer_bwd_schedule);
}

void run(const Args& a) {
  if (a.trace) model::check_output_file(*a.trace, "--trace");  // before any work
  if (a.search_tp_overlap && !a.search) throw UserError("--search-tp-overlap needs --search");
  step::Overrides model_sets;
  sim::Overrides topo_sets;
  for (const auto& s : a.sets) {
    auto kv = model::parse_assignment(s);
    (step::is_model_key(kv.first) ? model_sets : topo_sets).push_back(std::move(kv));
  }
  if (a.nodes) topo_sets.emplace_back("nodes", std::to_string(*a.nodes));
  const step::ModelSpec spec = step::load_model(a.model, model_sets);
  const sim::Topology t = sim::load_topology(a.topology, topo_sets);
  nlohmann::json head = {{"model", spec.name}, {"topology", t.name}, {"nodes", t.nodes},
                         {"gpus", t.total_gpus()}, {"search", a.search}};
  std::vector<step::StepReport> reports;
  step::LayerBlockPricer layers(t);  // the step's layers, for their kernel choices
  int evaluated = 1, over = 0, laid_out = 1;
  if (a.search) {
    step::SearchOptions o;
    o.keep = a.top;
    o.vary_tp_overlap = a.search_tp_overlap;
    const step::SearchResult r = step::search_layouts(spec, t, o);
    evaluated = r.evaluated;
    over = r.over_memory;
    laid_out = r.laid_out;
    if (r.best.empty())
      throw UserError(fmt::format("{} on {} x {} GPUs: no layout fits: {}", spec.name, t.nodes, t.node.gpus,
                                  step::why_none_fits(r, t)));
    reports = r.best;
  } else {
    reports.push_back(step::predict_step(spec, t, nullptr, &layers));
    over = reports.front().memory.fits() ? 0 : 1;
  }
  if (a.trace) {
    model::write_file_safely(*a.trace, step::step_trace_json(reports.front()), "--trace");
    fmt::print(stderr, "wrote trace {}\n", *a.trace);
  }
  head["evaluated"] = evaluated;
  head["over_memory"] = over;
  if (a.format == Format::json) {
    nlohmann::json layouts = nlohmann::json::array();
    for (const auto& r : reports) layouts.push_back(layout_json(r, kernels_of(r, layers)));
    head["layouts"] = layouts;
    return print_json(tagged("step", head));
  }
  if (a.format == Format::csv) return print(layouts_table(reports, Format::csv), Format::csv);
  if (!a.search) return print_detail(reports.front(), t, kernels_of(reports.front(), layers));
  const double usable = reports.front().memory.usable_GB();
  fmt::print("# {} on {}: {} nodes x {} GPUs = {} GPUs; {} layouts sized, {} over the {:.1f} GB usable, {} laid out "
             "(the rest could not beat them); the best {}\n",
             spec.name, t.name, t.nodes, t.node.gpus, t.total_gpus(), evaluated, over, usable, laid_out, reports.size());
  print(layouts_table(reports, Format::table), Format::table);
  fmt::print("\n");
  print_detail(reports.front(), t, kernels_of(reports.front(), layers));
}

}  // namespace

void register_step(CLI::App& app) {
  auto* cmd = app.add_subcommand("step", "Predict one training step of a model (models/*.yaml) on a cluster");
  auto a = std::make_shared<Args>();
  cmd->add_option("model", a->model, "Model name (models/) or YAML file")->required();
  cmd->add_option("--topology,-t", a->topology, "Topology name (configs/topologies/) or YAML file")
      ->capture_default_str();
  cmd->add_option("--nodes,-N", a->nodes, "Nodes (default: the topology's)")->check(at_least(1));
  cmd->add_option("--set", a->sets,
                  "Override a value: SECTION.KEY=VALUE of the model (parallel.tp=4, training.micro_batch=2) or of "
                  "the topology (gpu.memory_GB=40) (repeatable)");
  cmd->add_flag("--search", a->search,
                "Search tp, pp, dp, micro-batch, pipeline schedule, ZeRO stage, recomputation and sequence "
                "parallelism within memory; print the best layouts");
  cmd->add_flag("--search-tp-overlap", a->search_tp_overlap,
                "With --search, also try each layout with parallel.tp_overlap both ways (slower: an overlapped "
                "layer tunes every schedule of its programs)");
  cmd->add_option("--trace", a->trace,
                  "Write a Chrome trace (Perfetto) JSON of one step here (with --search, of the best layout)");
  cmd->add_option("--top", a->top, "Layouts --search prints")->capture_default_str()->check(at_least(1));
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
