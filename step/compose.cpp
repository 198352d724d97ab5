// Composition of a step. Design decisions:
// - A layer's forward and backward are the layer programs
//   (workloads/megatron_layer_*.yaml) priced by the tuner on the TP group
//   (step/layer_block.h); what the programs leave out (the attention
//   dropout, the bias and LayerNorm parameter gradients) by the bytes it moves.
// - Every kernel pays one launch, as in the rest of the cost model.
// - Megatron-LM's rank order: tensor-parallel ranks adjacent, then data
//   parallel, then pipeline stages; so a TP group packs onto one node, a DP
//   group has min(dp, gpus per node / tp) members per node, and a pipeline's
//   neighbours sit tp x dp ranks apart.
// - The slowest stage is the last (its layers plus the output layer); the
//   step is m micro-batches of it, the bubble (pp - 1) / v of a micro-batch's
//   forward and backward (Narayanan et al. SC'21, section 2.2), the sends on
//   the critical path (step/pipeline.h lays the schedule out to the same
//   span), the data-parallel reduction left exposed, and the optimizer.
// - The data-parallel reduction and Adam of each gradient bucket are the adam
//   workload, priced by the tuner (step/dp_block.h) for ZeRO 0-2 with 16-bit
//   gradients; ZeRO 3 and 32-bit gradients by the formulas below.
#include "step/compose.h"

#include <algorithm>
#include <optional>
#include <cmath>

#include "model/error.h"
#include "sim/collective.h"
#include "sim/compute.h"

namespace coconet::step {

namespace {

using model::OpKind;

// The attention core's kernels as selective recomputation runs them again:
// scores GEMM, softmax, the probabilities' dropout (GPT only), context GEMM.
constexpr int kGptAttentionCoreKernels = 4;
constexpr int kLlamaAttentionCoreKernels = 3;
constexpr double kBwdElementwiseFactor = 2.0;  // a backward kernel reads the output gradient and a saved input, writes one gradient
constexpr double kAdamFlopsPerParam = 12;      // moments, bias corrections, update
constexpr double kBytesPerMB = 1e6;
constexpr double kAdamGradBytes = 2;
constexpr double kSecondsPerUs = 1e-6;
constexpr double kFlopsPerTflop = 1e12;  // the adam workload's gradients are f16 (workloads/adam.yaml)

struct Shapes {
  std::int64_t tokens;   // b s
  std::int64_t hidden;   // h
  std::int64_t heads_per_gpu;
  std::int64_t kv_heads_per_gpu;
  std::int64_t head_dim;
  std::int64_t seq;
  std::int64_t micro_batch;
  std::int64_t ffn_per_gpu;
  std::int64_t vocab_per_gpu;
  int tp;
  model::DType dtype;
  Family family;
};

Shapes shapes_of(const ModelSpec& s, const Layout& l) {
  const auto& m = s.model;
  return Shapes{s.training.micro_batch * m.sequence, m.hidden,       m.heads / l.tp,
                m.kv_heads / l.tp,                   m.head_dim,     m.sequence,
                s.training.micro_batch,              m.ffn / l.tp,   (m.vocabulary + l.tp - 1) / l.tp,
                l.tp,                                s.training.dtype, m.family()};
}

struct Kernels {
  double gemm_us = 0;
  double elementwise_us = 0;  // launches included
};

double gemm(const sim::Topology& t, std::int64_t m, std::int64_t n, std::int64_t k, model::DType d) {
  return sim::gemm_body_us(t, sim::GemmShape{m, n, k, d}, t.gpu.sms);
}

// Forward, dgrad and wgrad of Y[m x n] = X[m x k] W[k x n].
struct GemmPasses {
  double fwd = 0;
  double bwd = 0;
};
GemmPasses linear(const sim::Topology& t, std::int64_t m, std::int64_t n, std::int64_t k, model::DType d) {
  return {gemm(t, m, n, k, d), gemm(t, m, k, n, d) + gemm(t, k, n, m, d)};
}

// The attention core: Q K^T and (softmax) V, batched over micro-batch x heads.
GemmPasses attention_core(const sim::Topology& t, const Shapes& x) {
  const std::int64_t batch = x.micro_batch * x.heads_per_gpu;
  const GemmPasses qk = linear(t, batch * x.seq, x.seq, x.head_dim, x.dtype);
  const GemmPasses av = linear(t, batch * x.seq, x.head_dim, x.seq, x.dtype);
  return {qk.fwd + av.fwd, qk.bwd + av.bwd};
}

double attention_dropout_bytes(const Shapes& x);

// Bytes the attention core's element-wise kernels move forward: the fused
// scaled masked softmax (read, write) and, in the GPT family, the dropout on
// its probabilities (read, write, a 1-byte mask).
double attention_elementwise_bytes(const Shapes& x) {
  const double e = model::bytes_of(x.dtype);
  const double scores = double(x.micro_batch) * double(x.heads_per_gpu) * double(x.seq) * double(x.seq);
  return scores * (2 * e) + attention_dropout_bytes(x);
}

double ew(const sim::Topology& t, double bytes) { return sim::elementwise_body_us(t, bytes, bytes / 2); }

// What the layer programs leave out, priced by the bytes it moves (see
// workloads/megatron_layer_*.yaml and llama_layer_*.yaml). GPT: forward, the
// attention probabilities' dropout (read, write, a 1-byte mask); backward,
// its backward and the bias, LayerNorm gamma and beta gradients (column sums
// of the output gradients: db2, dbo over T x h, db1 over T x f/t, dbqkv over
// T x 3h/t; dgamma and dbeta of each LayerNorm read the gradient and the
// normalised input). Llama (no dropout, no biases): rotary position
// embeddings on the queries and keys forward and on their gradients backward
// (read and write T x (a + kv) D / t), the RMSNorms' gamma gradients (read the
// gradient and the normalised input).
constexpr int kGptLeftOutFwdKernels = 1;    // attention dropout
constexpr int kGptLeftOutBwdKernels = 7;    // attention dropout, 4 bias gradients, 2 LayerNorm parameter gradients
constexpr int kLlamaLeftOutFwdKernels = 1;  // RoPE on q and k
constexpr int kLlamaLeftOutBwdKernels = 3;  // RoPE on dq and dk, 2 RMSNorm gamma gradients

double attention_dropout_bytes(const Shapes& x) {
  if (x.family != Family::gpt) return 0;
  const double e = model::bytes_of(x.dtype);
  const double scores = double(x.micro_batch) * double(x.heads_per_gpu) * double(x.seq) * double(x.seq);
  return scores * (2 * e + 1);
}

// Rotary embeddings (Su et al. 2021, "RoFormer"): read and write the queries and keys.
double rope_bytes(const Shapes& x) {
  if (x.family != Family::llama) return 0;
  const double e = model::bytes_of(x.dtype);
  return 2 * double(x.tokens) * double(x.heads_per_gpu + x.kv_heads_per_gpu) * double(x.head_dim) * e;
}

double parameter_gradient_bytes(const Shapes& x, bool sp) {
  const double e = model::bytes_of(x.dtype);
  const double th = double(x.tokens) * double(x.hidden) / (sp ? x.tp : 1);
  const double norms = 2 * 2 * th;  // two norms, each reading the gradient and the normalised input
  if (x.family == Family::llama) return norms * e;
  const double per_gpu_h = double(x.tokens) * double(x.hidden) / x.tp;
  const double biases = 2 * th + double(x.tokens) * double(x.ffn_per_gpu) + 3 * per_gpu_h;
  return (biases + norms) * e;
}

struct LayerCompute {
  Kernels fwd;
  Kernels bwd;
  Kernels attention_fwd;  // what selective recomputation runs again
  double fwd_tp_us = 0;
  double bwd_tp_us = 0;
  std::string fwd_schedule;
  std::string bwd_schedule;
};

LayerShape layer_shape(const ModelSpec& s, const Layout& l, bool sp) {
  const auto& m = s.model;
  LayerShape x{s.training.micro_batch, m.sequence, m.heads,          m.head_dim, m.ffn,     l.tp,
                    s.training.dtype,       sp,         tp_overlap_on(s.parallel, l), m.family(), m.hidden, m.kv_heads};
  x.fp8 = s.training.fp8;
  return x;
}

// The layer programs' best schedules (step/layer_block.h), plus what they
// leave out by formula; selective recomputation's attention core by its
// GEMMs and the softmax and dropout bytes.
LayerCompute layer_compute(const sim::Topology& t, const Shapes& x, const LayerBlock& tuned, bool sp) {
  const double launch = t.gpu.launch_us;
  const bool gpt = x.family == Family::gpt;
  // Forward and backward each move these bytes once (the dropout's backward twice: kBwdElementwiseFactor).
  const double drop = gpt ? ew(t, attention_dropout_bytes(x)) : 0.0;
  const double rope = gpt ? 0.0 : ew(t, rope_bytes(x));
  const int fwd_kernels = gpt ? kGptLeftOutFwdKernels : kLlamaLeftOutFwdKernels;
  const int bwd_kernels = gpt ? kGptLeftOutBwdKernels : kLlamaLeftOutBwdKernels;
  LayerCompute c;
  c.fwd.gemm_us = tuned.fwd.gemm_us;
  c.fwd.elementwise_us = tuned.fwd.elementwise_us + drop + rope + fwd_kernels * launch;
  c.fwd_tp_us = tuned.fwd.tp_us();
  c.bwd.gemm_us = tuned.bwd.gemm_us;
  c.bwd.elementwise_us = tuned.bwd.elementwise_us + kBwdElementwiseFactor * drop + rope +
                         ew(t, parameter_gradient_bytes(x, sp)) + bwd_kernels * launch;
  c.bwd_tp_us = tuned.bwd.tp_us();
  c.fwd_schedule = tuned.fwd.schedule;
  c.bwd_schedule = tuned.bwd.schedule;
  c.attention_fwd.gemm_us = attention_core(t, x).fwd;
  c.attention_fwd.elementwise_us =
      ew(t, attention_elementwise_bytes(x)) + (gpt ? kGptAttentionCoreKernels : kLlamaAttentionCoreKernels) * launch;
  return c;
}

double collective_us(const sim::Topology& t, OpKind op, double bytes, const sim::Placement& where) {
  if (where.ranks <= 1 || bytes <= 0) return 0;
  sim::CollectiveRequest r;
  r.op = op;
  r.bytes = bytes;
  r.where = where;
  return sim::predict_collective(t, r).time_us();
}

// The output layer on the last stage: logits GEMM (vocabulary split over tp)
// and the cross-entropy (read and write the logits in fp32); its forward and backward.
GemmPasses output_layer(const sim::Topology& t, const Shapes& x) {
  GemmPasses g = linear(t, x.tokens, x.vocab_per_gpu, x.hidden, x.dtype);
  const double logits = double(x.tokens) * double(x.vocab_per_gpu) * 4.0;
  g.fwd += ew(t, 2 * logits) + 2 * t.gpu.launch_us;
  g.bwd += ew(t, 2 * logits) + 3 * t.gpu.launch_us;
  return g;
}

sim::Placement dp_placement(const sim::Topology& t, const Layout& l) {
  sim::Placement p;
  p.ranks = l.dp;
  p.per_node = std::max(1, std::min(l.dp, t.node.gpus / std::max(1, l.tp)));
  p.nodes = (l.dp + p.per_node - 1) / p.per_node;
  return p;
}

sim::Placement pp_placement(const sim::Topology& t, const Layout& l) {
  sim::Placement p;
  p.ranks = 2;
  p.send_crosses_nodes = std::int64_t(l.tp) * l.dp >= t.node.gpus;
  p.nodes = p.send_crosses_nodes ? 2 : 1;
  p.per_node = p.send_crosses_nodes ? 1 : 2;
  return p;
}

// `bytes` in buckets of `bucket` bytes, each one collective.
double bucketed_us(const sim::Topology& t, OpKind op, double bytes, double bucket, const sim::Placement& where,
                   double* last_bucket_us) {
  if (where.ranks <= 1 || bytes <= 0) {
    *last_bucket_us = 0;
    return 0;
  }
  const double full = std::floor(bytes / bucket);
  const double rest = bytes - full * bucket;
  const double one = full > 0 ? collective_us(t, op, bucket, where) : 0;
  const double tail = rest > 0 ? collective_us(t, op, rest, where) : 0;
  *last_bucket_us = rest > 0 ? tail : one;
  return full * one + tail;
}

// Collectives of `total` us in buckets, the last taking `last` us, that can
// start as the overlapped window of `window` us runs: what is left exposed.
double exposed_us(double total, double last, double window) {
  return last + std::max(0.0, total - last - window);
}

double adam_us(const ModelSpec& s, const sim::Topology& t, double params) {
  const double bytes = params * (24.0 + model::bytes_of(s.training.grad_dtype) + model::bytes_of(s.training.dtype));
  return sim::elementwise_body_us(t, bytes, params * kAdamFlopsPerParam) + t.gpu.launch_us;
}

// ZeRO 0-2 with 16-bit gradients: each bucket's reduction and Adam step of
// the last micro-batch is the adam workload, priced by the tuner (optimizer
// state replicated for ZeRO 0, sliced from ZeRO 1); the blocks run as the last
// micro-batch's backward fills their buckets, all but the last hidden behind
// it. Adam per bucket needs no other bucket (gradient clipping by the global
// norm, which would, is not modelled).
void price_tuned_blocks(const ModelSpec& s, const Layout& l, const sim::Placement& group, DpBlockPricer& pricer,
                        StepReport& r) {
  const double params = stage_parameters(s, l);
  const double per_bucket = std::max(1.0, std::floor(s.parallel.bucket_MB * kBytesPerMB / kAdamGradBytes));
  const double full = std::floor(params / per_bucket);
  const double rest = params - full * per_bucket;
  const bool sliced = s.parallel.zero >= 1;
  const DpBlock one = full > 0 ? pricer.price(std::int64_t(per_bucket), group, sliced) : DpBlock{};
  const DpBlock tail = rest > 0 ? pricer.price(std::int64_t(std::ceil(rest)), group, sliced) : DpBlock{};
  r.dp_total_us = full * one.time_us + tail.time_us;
  r.dp_schedule = full > 0 ? one.schedule : tail.schedule;
  if (rest > 0 && full > 0 && tail.schedule != one.schedule) r.dp_schedule += " (last bucket " + tail.schedule + ")";
  r.breakdown.dp_comm_us = exposed_us(r.dp_total_us, rest > 0 ? tail.time_us : one.time_us, r.stage_bwd_us);
  r.breakdown.optimizer_us = 0;
}

// The data-parallel reduction per ZeRO stage (Rajbhandari et al., SC'20,
// section 7: ZeRO 0-2 move 2 x the parameters per step, a reduce-scatter and
// an all-gather or an allreduce; ZeRO 3 3 x, gathering the parameters for the
// forward and again for the backward) and the optimizer. `mb_compute_us`: one
// micro-batch's kernels on the stage, what ZeRO 3's gathers hide behind.
void price_data_parallel(const ModelSpec& s, const Layout& l, const sim::Topology& t, DpBlockPricer& pricer,
                         double mb_compute_us, StepReport& r) {
  Breakdown& b = r.breakdown;
  const sim::Placement dpw = dp_placement(t, l);
  const double params = stage_parameters(s, l);
  const double grad_bytes = params * model::bytes_of(s.training.grad_dtype);
  const double weight_bytes = params * model::bytes_of(s.training.dtype);
  const double bucket = s.parallel.bucket_MB * kBytesPerMB;
  const double m = double(l.micro_batches);
  double last = 0;
  if (l.dp > 1 && s.parallel.zero <= 2 && model::bytes_of(s.training.grad_dtype) == kAdamGradBytes) {
    price_tuned_blocks(s, l, dpw, pricer, r);
    if (s.parallel.zero == 2) {
      // ZeRO 2 keeps only its slice of the gradients: every micro-batch's are
      // reduce-scattered in its own backward, the last one's in the tuned blocks.
      const double rs = bucketed_us(t, OpKind::reducescatter, grad_bytes, bucket, dpw, &last);
      r.dp_total_us += (m - 1) * rs;
      b.dp_comm_us += (m - 1) * exposed_us(rs, last, r.stage_bwd_us);
    }
    return;
  }
  switch (s.parallel.zero) {
    case 0: {
      r.dp_total_us = bucketed_us(t, OpKind::allreduce, grad_bytes, bucket, dpw, &last);
      b.dp_comm_us = l.dp > 1 ? exposed_us(r.dp_total_us, last, r.stage_bwd_us) : 0;
      break;
    }
    case 1:
    case 2: {
      // ZeRO 1 keeps whole gradients and reduce-scatters them once, in the
      // last micro-batch's backward; ZeRO 2 keeps only its slice, so every
      // micro-batch's gradients are reduce-scattered in its own backward.
      const double rounds = s.parallel.zero == 2 ? m : 1.0;
      const double rs = bucketed_us(t, OpKind::reducescatter, grad_bytes, bucket, dpw, &last);
      double last_ag = 0;
      const double ag = bucketed_us(t, OpKind::allgather, weight_bytes, bucket, dpw, &last_ag);
      r.dp_total_us = rounds * rs + ag;
      b.dp_comm_us = l.dp > 1 ? rounds * exposed_us(rs, last, r.stage_bwd_us) + exposed_us(ag, last_ag, r.stage_fwd_us)
                              : 0;
      break;
    }
    default: {  // 3: parameters gathered for each micro-batch's forward and backward, gradients reduce-scattered
      double last_ag = 0;
      const double ag = bucketed_us(t, OpKind::allgather, weight_bytes, bucket, dpw, &last_ag);
      const double rs = bucketed_us(t, OpKind::reducescatter, grad_bytes, bucket, dpw, &last);
      r.dp_total_us = m * (2 * ag + rs);
      b.dp_comm_us = l.dp > 1 ? m * exposed_us(2 * ag + rs, last, mb_compute_us) : 0;
      break;
    }
  }
  b.optimizer_us = adam_us(s, t, params / (s.parallel.zero >= 1 ? l.dp : 1));
}

}  // namespace

double StepReport::stage_layers() const { return double(spec.model.layers) / layout.pp; }
double StepReport::stage_fwd_tp_us() const { return stage_layers() * layer.fwd_tp_us; }
double StepReport::stage_bwd_tp_us() const { return stage_layers() * layer.bwd_tp_us + stage_recompute_tp_us(); }
double StepReport::stage_recompute_us() const { return stage_layers() * layer.recompute_us; }
double StepReport::stage_recompute_tp_us() const {
  return spec.parallel.recompute == Recompute::full ? stage_layers() * layer.fwd_tp_us : 0.0;
}

StepReport predict_step(const ModelSpec& s, const sim::Topology& t, DpBlockPricer* dp, LayerBlockPricer* layer_pricer) {
  StepReport r;
  r.spec = s;
  r.topology = t.name;
  const Layout l = resolve_layout(s, t);
  r.layout = l;
  const bool sp = sequence_parallel_on(s.parallel, l);
  const Shapes x = shapes_of(s, l);

  // One layer, one micro-batch.
  const LayerShape shape = layer_shape(s, l, sp);
  std::optional<LayerBlockPricer> own_layers;  // without the caller's cache, one for this step
  const LayerBlock tuned = (layer_pricer != nullptr ? *layer_pricer : own_layers.emplace(t)).price(shape);
  const LayerCompute c = layer_compute(t, x, tuned, sp);
  r.layer_fwd_schedule = c.fwd_schedule;
  r.layer_bwd_schedule = c.bwd_schedule;
  LayerTimes& lt = r.layer;
  lt.fwd_gemm_us = c.fwd.gemm_us;
  lt.fwd_elementwise_us = c.fwd.elementwise_us;
  lt.fwd_tp_us = c.fwd_tp_us;
  lt.bwd_gemm_us = c.bwd.gemm_us;
  lt.bwd_elementwise_us = c.bwd.elementwise_us;
  lt.bwd_tp_us = c.bwd_tp_us;
  switch (s.parallel.recompute) {
    case Recompute::none: break;
    case Recompute::selective: lt.recompute_us = c.attention_fwd.gemm_us + c.attention_fwd.elementwise_us; break;
    case Recompute::full: lt.recompute_us = lt.fwd_us(); break;
  }

  // The last stage, one micro-batch through all its virtual chunks.
  const double layers = r.stage_layers();
  const GemmPasses out = output_layer(t, x);
  const double tp_mb = r.stage_fwd_tp_us() + r.stage_bwd_tp_us();
  r.stage_fwd_us = layers * lt.fwd_us() + out.fwd;
  r.stage_bwd_us = layers * lt.bwd_us() + out.bwd;
  const double mb_us = r.stage_fwd_us + r.stage_bwd_us;
  const double m = double(l.micro_batches);

  Breakdown& b = r.breakdown;
  b.tp_comm_us = m * tp_mb;
  b.compute_us = m * (mb_us - tp_mb);
  b.pp_bubble_us = double(l.pp - 1) / l.virtual_stages * mb_us;
  if (l.pp > 1) {
    const double act = double(x.tokens) * double(x.hidden) * model::bytes_of(x.dtype) / l.tp;  // scatter-gather over tp
    r.send_us = collective_us(t, OpKind::send, act, pp_placement(t, l));
    // Each chunk step on the critical path sends once forward and once
    // backward: the m v steps of every micro-batch's chunks and the pp - 1 of
    // the fill and the drain (the steps the bubble counts).
    b.pp_p2p_us = (m * l.virtual_stages + double(l.pp - 1)) * 2 * r.send_us;
  }

  std::optional<DpBlockPricer> own_dp;
  price_data_parallel(s, l, t, dp != nullptr ? *dp : own_dp.emplace(t), mb_us - tp_mb, r);

  r.step_us = b.total_us();
  r.model_flops = model_flops(s);
  r.hardware_flops = hardware_flops(s);
  r.eq3_flops = megatron_eq3_flops(s);
  const double per_gpu_tflops = 1.0 / (r.step_us * kSecondsPerUs) / l.gpus / kFlopsPerTflop;
  r.model_tflops_per_gpu = r.model_flops * per_gpu_tflops;
  r.hardware_tflops_per_gpu = r.hardware_flops * per_gpu_tflops;
  r.eq3_tflops_per_gpu = r.eq3_flops * per_gpu_tflops;
  r.peak_tflops = s.training.fp8 && t.gpu.tflops_fp8 ? *t.gpu.tflops_fp8 : t.gpu.gemm_tflops(s.training.dtype);
  r.mfu = r.peak_tflops > 0 ? r.model_tflops_per_gpu / r.peak_tflops : 0.0;
  r.tokens_per_s = double(s.training.global_batch) * double(s.model.sequence) / (r.step_us * kSecondsPerUs);
  r.memory = memory_per_gpu(s, l, t);
  return r;
}

}  // namespace coconet::step
