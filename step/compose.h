// One training step of a model on a cluster, composed from the cost model's
// own pieces: a transformer layer's forward and backward (the layer programs'
// best schedules by the tuner on the tensor-parallel group: step/layer_block.h;
// what they leave out by sim::elementwise_body_us over the bytes it moves),
// context parallelism's K/V exchange (sim::predict_collective on the
// context-parallel group), each virtual stage's layers with the embedding on
// the first and the output layer and loss on the last, laid out by the
// pipeline schedule (step/pipeline.h: the span, so the bubble), the
// data-parallel gradient reduction per ZeRO stage with the optimizer step (per
// bucket, the adam workload's best schedule by the tuner: step/dp_block.h,
// Adam's only price). Groups are placed by sim (place, place_strided,
// place_send) in Megatron-LM's rank order. docs/step.md states every formula,
// its source, and what is left out.
#pragma once

#include <string>
#include <vector>

#include "sim/topology.h"
#include "step/dp_block.h"
#include "step/flops.h"
#include "step/layer_block.h"
#include "step/memory.h"
#include "step/spec.h"

namespace coconet::step {

// One transformer layer, one micro-batch, on one GPU of its TP group (us).
struct LayerTimes {
  double fwd_gemm_us = 0;
  double fwd_elementwise_us = 0;  // element-wise kernels and every kernel's launch
  double fwd_tp_us = 0;           // the forward's TP collectives
  double bwd_gemm_us = 0;
  double bwd_elementwise_us = 0;
  double bwd_tp_us = 0;
  double recompute_us = 0;        // the forward again (compute and TP collectives), by recomputation
  double fwd_cp_us = 0;           // context parallelism's K/V exchange left exposed, forward
  double bwd_cp_us = 0;           // and backward (K/V and their gradients)
  double fwd_a2a_us = 0;          // an MoE layer's all-to-alls left exposed (dispatch and combine), forward
  double bwd_a2a_us = 0;          // and backward

  [[nodiscard]] double fwd_us() const { return fwd_gemm_us + fwd_elementwise_us + fwd_tp_us + fwd_a2a_us; }
  [[nodiscard]] double bwd_us() const {
    return bwd_gemm_us + bwd_elementwise_us + bwd_tp_us + bwd_a2a_us + recompute_us;
  }
};

// One virtual stage (a model chunk of a pipeline stage), one micro-batch (us):
// its layers, with the embedding on the first and the output layer and loss
// on the last.
struct ChunkTimes {
  int layers = 0;
  double fwd_compute_us = 0;
  double fwd_tp_us = 0;
  double fwd_cp_us = 0;
  double recompute_us = 0;     // kernels run again by recomputation
  double recompute_tp_us = 0;  // their TP collectives (full recomputation)
  double recompute_cp_us = 0;  // and K/V exchange (full recomputation)
  double bwd_compute_us = 0;
  double bwd_tp_us = 0;
  double bwd_cp_us = 0;
  double fwd_amax_us = 0;      // FP8: the all-reduce of its tensors' amaxes at the end of its forward
  double fwd_a2a_us = 0;       // its MoE layers' all-to-alls left exposed
  double recompute_a2a_us = 0; // (full recomputation runs the forward's again)
  double bwd_a2a_us = 0;
  [[nodiscard]] double fwd_us() const { return fwd_compute_us + fwd_tp_us + fwd_cp_us + fwd_amax_us + fwd_a2a_us; }
  [[nodiscard]] double bwd_us() const {
    return recompute_us + recompute_tp_us + recompute_cp_us + recompute_a2a_us + bwd_compute_us + bwd_tp_us +
           bwd_cp_us + bwd_a2a_us;
  }
  [[nodiscard]] double a2a_us() const { return fwd_a2a_us + recompute_a2a_us + bwd_a2a_us; }
  [[nodiscard]] double compute_us() const { return fwd_compute_us + recompute_us + bwd_compute_us; }
  // The TP collectives, and FP8's amax all-reduce (over the stage's TP, CP and DP ranks).
  [[nodiscard]] double tp_us() const { return fwd_tp_us + recompute_tp_us + bwd_tp_us + fwd_amax_us; }
  [[nodiscard]] double cp_us() const { return fwd_cp_us + recompute_cp_us + bwd_cp_us; }
};

// Where the step's time goes (us); they add up to the step time.
struct Breakdown {
  double compute_us = 0;      // every micro-batch's kernels on the slowest stage
  double tp_comm_us = 0;      // tensor-parallel collectives (not overlapped in Megatron-LM), FP8's amax all-reduce
  double cp_comm_us = 0;      // context parallelism's K/V exchange left exposed
  double ep_comm_us = 0;      // the MoE layers' dispatch and combine all-to-alls left exposed
  double pp_bubble_us = 0;    // the pipeline's fill and drain
  double pp_p2p_us = 0;       // activations and gradients sent between stages, on the critical path
  double dp_comm_us = 0;      // data-parallel reduction not hidden behind the backward (with the
                              // optimizer when the tuner priced both as one block: dp_schedule)
  double optimizer_us = 0;    // Adam over this GPU's share of the parameters (0: in dp_comm_us)

  [[nodiscard]] double total_us() const {
    return compute_us + tp_comm_us + cp_comm_us + ep_comm_us + pp_bubble_us + pp_p2p_us + dp_comm_us + optimizer_us;
  }
};

struct StepReport {
  ModelSpec spec;  // as priced (search fills in the layout it tried)
  Layout layout;
  std::string topology;
  LayerTimes layer;      // a dense layer (every layer of a dense model)
  LayerTimes moe_layer;  // a layer with experts (a moe section): its attention, then its experts
  std::vector<ChunkTimes> chunks;  // per virtual stage, k = chunk x pp + stage (layout.chunk_layers)
  int slowest_stage = 0;           // the stage with the most time per micro-batch: it sets the pace
  double pipeline_span_us = 0;     // the laid-out pipeline (step/pipeline.h), sends included
  // Whether pipeline_span_us is the laid-out span (predict_step) or its lower
  // bound (predict_step_bound: then the bubble, step time and rates are bounds too).
  bool pipeline_laid_out = false;
  double stage_fwd_us = 0;  // per micro-batch, the slowest stage, every virtual chunk
  double stage_bwd_us = 0;  // (embedding and output layer included where the stage has them)
  // Of them, for the trace, over the slowest stage's chunks: the TP
  // collectives of the forward, of the backward (recomputation's included) and
  // the recomputation (its TP collectives included).
  [[nodiscard]] double stage_layers() const;  // transformer layers of the slowest stage, every virtual chunk
  [[nodiscard]] double stage_fwd_tp_us() const;
  [[nodiscard]] double stage_bwd_tp_us() const;
  [[nodiscard]] double stage_recompute_us() const;
  [[nodiscard]] double stage_recompute_tp_us() const;
  double send_us = 0;       // one pipeline send between neighbour stages (0 without a pipeline)
  double dp_total_us = 0;   // the data-parallel collectives before overlap (and the optimizer, if tuned)
  // The adam workload's schedule the tuner chose for each bucket's reduction
  // and optimizer step (every ZeRO stage and gradient dtype).
  std::string dp_schedule;
  // The layer programs' schedules the tuner chose for one layer's forward and
  // backward (workloads/megatron_layer_*.yaml).
  std::string layer_fwd_schedule;
  std::string layer_bwd_schedule;
  // The MoE programs' schedules for the experts (workloads/moe_layer_*.yaml),
  // empty for a dense model.
  std::string moe_fwd_schedule;
  std::string moe_bwd_schedule;
  [[nodiscard]] double stage_a2a_us() const;  // the slowest stage's exposed all-to-alls per micro-batch
  Breakdown breakdown;
  double step_us = 0;
  // FLOPs per step, the whole job (step/flops.h: 2 per multiply-add, GEMMs
  // only, non-causal attention), and each over the step time per GPU.
  double model_flops = 0;     // no recomputation (what the model needs)
  double hardware_flops = 0;  // with the recomputation the layout runs
  double eq3_flops = 0;       // Megatron-LM SC'21 eq. 3 (full recomputation counted whatever the layout)
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double eq3_tflops_per_gpu = 0;  // the figure SC'21's tables print
  // Model FLOPs utilisation (Chowdhery et al., PaLM, 2022, appendix B): model
  // TFLOP/s per GPU over the dense peak of the precision the GEMMs run in
  // (peak_tflops: the topology's tflops for training.dtype; 0 on a cpu
  // topology, whose rates are calibrated achieved ones: no MFU).
  double mfu = 0;
  double peak_tflops = 0;
  double tokens_per_s = 0;
  Memory memory;
};

// Each virtual stage's forward and backward per micro-batch, each with its
// pipeline send: the times the pipeline is laid out with (step/pipeline.h).
struct ChunkSteps {
  std::vector<double> fwd, bwd;
};
[[nodiscard]] ChunkSteps chunk_steps(const StepReport& r);

// Prices one step; throws UserError for a layout the cluster cannot hold
// (resolve_layout). A layout that does not fit in memory is priced too and
// says so in memory.fits. `dp` prices the data-parallel blocks through the
// tuner and caches them, `layers` a layer's forward and backward; each must
// be made for `t` (nullptr: a fresh one).
[[nodiscard]] StepReport predict_step(const ModelSpec& s, const sim::Topology& t, DpBlockPricer* dp = nullptr,
                                      LayerBlockPricer* layers = nullptr);

// predict_step with the pipeline's span bounded below (step/pipeline.h
// span_lower_bound_us) instead of laid out: every other part as predict_step
// prices it, the bubble and step time at most predict_step's (equal without a
// pipeline, or with every virtual stage alike). Laying a pipeline out takes
// time in its micro-batches x chunks; a search ranks layouts by this bound
// and lays out only those that can still win.
[[nodiscard]] StepReport predict_step_bound(const ModelSpec& s, const sim::Topology& t, DpBlockPricer* dp = nullptr,
                                            LayerBlockPricer* layers = nullptr);
// What a search knows of a layout before pricing it: resolve_layout(s, t) and
// memory_per_gpu(s, layout, t) (the attention the model allows).
struct SizedLayout {
  Layout layout;
  Memory allowed_memory;
};
// predict_step_bound of a layout the caller resolved and sized: neither is
// done again (the memory is the one given when the tuner's attention is the
// one allowed), and the report's spec is left empty (a search keeps the step
// time and memory of a bound; the reports it returns are predict_step's).
[[nodiscard]] StepReport predict_step_bound(const ModelSpec& s, const SizedLayout& sized, const sim::Topology& t,
                                            DpBlockPricer* dp, LayerBlockPricer* layers);
// Lays out a bound report's pipeline: it becomes predict_step's report.
void lay_out_pipeline(StepReport& r);

}  // namespace coconet::step
