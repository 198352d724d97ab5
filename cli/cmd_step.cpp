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
#include "cli/step_results.h"
#include "model/set_flag.h"
#include "model/error.h"
#include "model/safe_write.h"
#include "sim/topology.h"
#include "step/compose.h"
#include "step/search.h"
#include "step/trace.h"
#include "validation/progress.h"

namespace coconet::cli {

namespace {

struct Args {
  StepRequest request;
  Format format = Format::table;
  std::optional<std::string> trace;  // given, even empty (an error), or not
};

// The layouts, one row each; in CSV with the breakdown's columns too (breakdown_ms of the JSON, in ms).
Table layouts_table(const std::vector<step::StepReport>& rs, Format f) {
  const bool breakdown = f == Format::csv;
  Table t{{"dp", "tp", "cp", "pp", "micro_batch", "schedule", "virtual_stages", "zero", "recompute", "sequence_parallel",
           "tp_overlap", "precision", "step_ms"}};
  if (breakdown)
    for (const char* c : {"compute_ms", "tp_comm_ms", "cp_comm_ms", "ep_comm_ms", "pp_bubble_ms", "pp_p2p_ms",
                          "dp_comm_ms", "optimizer_ms"})
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
                          step::tp_overlap_on(r.spec.parallel, r.layout),
                          r.spec.training.fp8 ? std::string("fp8") : model::to_string(r.spec.training.dtype),
                          r.step_us / kUsPerMs};
    const auto& b = r.breakdown;
    if (breakdown)
      for (const double us : {b.compute_us, b.tp_comm_us, b.cp_comm_us, b.ep_comm_us, b.pp_bubble_us, b.pp_p2p_us,
                              b.dp_comm_us, b.optimizer_us})
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
  const std::string heads =
      md.latent() ? fmt::format("{} heads of {} (q, k) and {} (v), MLA latents q {} kv {} + rope {}", md.heads,
                                md.head_dim, md.v_head_dim(), md.mla.q_lora_rank, md.mla.kv_lora_rank,
                                md.mla.qk_rope_head_dim)
                  : fmt::format("{} heads ({} K/V) of {}", md.heads, md.kv_heads, md.head_dim);
  fmt::print("# {} layers, hidden {}, {}, ffn {} {}, {}, embeddings {}; layer programs {} and {}\n", md.layers,
             md.hidden, heads, md.ffn, step::to_string(md.ffn_type), step::to_string(md.norm),
             md.tied_embeddings ? "tied" : "untied", programs.first, programs.second);
  fmt::print("# kernels: {}\n", kernels_label(k));
  fmt::print("step time                    {:>10.1f} ms\n", step / kUsPerMs);
  line("compute", b.compute_us);
  line("exposed TP communication", b.tp_comm_us);
  if (r.layout.cp > 1) line("exposed CP K/V exchange", b.cp_comm_us);
  if (r.spec.moe.on()) line("exposed all-to-all (EP)", b.ep_comm_us);
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
               r.peak_tflops, r.spec.training.fp8 ? std::string("fp8") : model::to_string(r.spec.training.dtype));
  else
    fmt::print("MFU                                 n/a   ({}'s rates are calibrated achieved rates, not a dense peak)\n",
               t.name);
  fmt::print("tokens per second            {:>10.0f}\n", r.tokens_per_s);
  fmt::print("memory per GPU               {:>10.1f} GB  of {} ({})\n", m.total_GB(),
             m.capacity_GB > 0
                 ? fmt::format("{:.1f} GB usable: {:g} GB less {:.1f} reserved", m.usable_GB(), m.capacity_GB,
                               m.reserved_GB)
                 : std::string("unknown HBM"),
             m.fits() ? "fits" : "DOES NOT FIT");
  fmt::print("  weights {:.1f}, gradients {:.1f}, optimizer {:.1f}, activations {:.1f} GB\n", m.weights_GB,
             m.gradients_GB, m.optimizer_GB, m.activations_GB);
  if (step::moe_layers(r.spec) < md.layers)  // a dense layer (for a model with experts, its dense_layers)
    fmt::print("layer, one micro-batch       fwd {:.0f} us (GEMM {:.0f}, element-wise {:.0f}, TP {:.0f}), bwd {:.0f} us"
               " (GEMM {:.0f}, element-wise {:.0f}, TP {:.0f}, recompute {:.0f})\n",
               r.layer.fwd_us(), r.layer.fwd_gemm_us, r.layer.fwd_elementwise_us, r.layer.fwd_tp_us, r.layer.bwd_us(),
               r.layer.bwd_gemm_us, r.layer.bwd_elementwise_us, r.layer.bwd_tp_us, r.layer.recompute_us);
  fmt::print("  the tuner's best schedules of the layer programs (TP overlap {}{}):\n    forward  {}\n    backward {}\n",
             step::tp_overlap_on(r.spec.parallel, r.layout) ? "allowed" : "off",
             r.layout.tp == 1 ? "; tp 1: their collectives are on one rank and cost nothing" : "",
             r.layer_fwd_schedule, r.layer_bwd_schedule);
  if (!r.spec.moe.on()) return;
  const auto& e = r.spec.moe;
  const auto& ml = r.moe_layer;
  fmt::print("MoE layer, one micro-batch   fwd {:.0f} us (GEMM {:.0f}, element-wise {:.0f}, TP {:.0f}, all-to-all {:.0f}), "
             "bwd {:.0f} us (GEMM {:.0f}, element-wise {:.0f}, TP {:.0f}, all-to-all {:.0f}, recompute {:.0f})\n",
             ml.fwd_us(), ml.fwd_gemm_us, ml.fwd_elementwise_us, ml.fwd_tp_us, ml.fwd_a2a_us, ml.bwd_us(),
             ml.bwd_gemm_us, ml.bwd_elementwise_us, ml.bwd_tp_us, ml.bwd_a2a_us, ml.recompute_us);
  fmt::print("  {} experts (top {}, {} shared) of ffn {}, {} router, imbalance {}; {} dense layers; ep {} x etp {} x "
             "expert dp {}\n  the tuner's best schedules of the MoE programs:\n    forward  {}\n    backward {}\n",
             e.experts, e.top_k, e.shared_experts, e.expert_ffn, step::to_string(e.router), e.imbalance,
             e.dense_layers, r.layout.ep, r.layout.etp, r.layout.edp, r.moe_fwd_schedule, r.moe_bwd_schedule);
}

void run(const Args& a) {
  if (a.trace) model::check_output_file(*a.trace, "--trace");  // before any work
  StepRequest request = a.request;
  // A search takes seconds to minutes: its progress on stderr (a bar on a
  // terminal, a line every validation::kProgressLinePeriodS elsewhere).
  std::optional<validation::Progress> progress;
  if (request.search) {
    progress.emplace(validation::progress_style(), 0);
    request.search_progress = [&progress](int done, int total, const std::string& what) {
      if (done == 0) {  // the first pair begins: the total is known
        progress->grow(total);
        progress->note(what);
      } else {
        progress->step(what);  // one pair done; `what` is the next (or the laying out)
      }
    };
  }
  const StepOutcome o = run_step(request);
  if (progress) progress->finish();
  const sim::Topology& t = o.topology;
  if (a.trace) {
    model::write_file_safely(*a.trace, step::step_trace_json(o.reports.front()), "--trace");
    fmt::print(stderr, "wrote trace {}\n", *a.trace);
  }
  if (a.format == Format::json) return print_json(step_json(o));
  if (a.format == Format::csv) return print(layouts_table(o.reports, Format::csv), Format::csv);
  step::LayerBlockPricer layers(t);  // the step's layers, for their kernel choices
  if (!a.request.search) return print_detail(o.reports.front(), t, kernels_of(o.reports.front(), layers));
  const double usable = o.reports.front().memory.usable_GB();
  fmt::print("# {} on {}: {} nodes x {} GPUs = {} GPUs; {} layouts sized, {} over the {:.1f} GB usable, {} laid out "
             "(the rest could not beat them); the best {}\n",
             o.spec.name, t.name, t.nodes, t.node.gpus, t.total_gpus(), o.evaluated, o.over_memory, usable, o.laid_out,
             o.reports.size());
  print(layouts_table(o.reports, Format::table), Format::table);
  fmt::print("\n");
  print_detail(o.reports.front(), t, kernels_of(o.reports.front(), layers));
}

}  // namespace

void register_step(CLI::App& app) {
  auto* cmd = app.add_subcommand("step", "Predict one training step of a model (models/*.yaml) on a cluster");
  auto a = std::make_shared<Args>();
  cmd->add_option("model", a->request.model, "Model name (models/) or YAML file")->required();
  cmd->add_option("--topology,-t", a->request.topology, "Topology name (configs/topologies/) or YAML file")
      ->capture_default_str();
  cmd->add_option("--nodes,-N", a->request.nodes, "Nodes (default: the topology's)")->check(at_least(1));
  cmd->add_option("--set", a->request.sets,
                  "Override a value: SECTION.KEY=VALUE of the model (parallel.tp=4, training.micro_batch=2) or of "
                  "the topology (gpu.memory_GB=40) (repeatable)");
  cmd->add_flag("--search", a->request.search,
                "Search tp, pp, dp, micro-batch, pipeline schedule, ZeRO stage, recomputation and sequence "
                "parallelism within memory; print the best layouts");
  cmd->add_flag("--search-tp-overlap", a->request.search_tp_overlap,
                "With --search, also try each layout with parallel.tp_overlap both ways (slower: an overlapped "
                "layer tunes every schedule of its programs)");
  cmd->add_option("--trace", a->trace,
                  "Write a Chrome trace (Perfetto) JSON of one step here (with --search, of the best layout)");
  cmd->add_option("--top", a->request.top, "Layouts --search prints")->capture_default_str()->check(at_least(1));
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
