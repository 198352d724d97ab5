// Composition of a step. Design decisions:
// - A layer's forward and backward are the layer programs
//   (workloads/megatron_layer_*.yaml) priced by the tuner on the TP group
//   (step/layer_block.h); what the programs leave out (the attention
//   dropout, the bias and LayerNorm parameter gradients) by the bytes it moves.
// - Every kernel pays one launch, as in the rest of the cost model.
// - Megatron-LM's rank order, TP, CP, DP, PP innermost first (the default
//   order "tp-cp-ep-dp-pp" of initialize_model_parallel,
//   megatron/core/parallel_state.py): a TP group is consecutive ranks, a CP
//   group tp apart, the gradient reduction's group (data parallel with the
//   context-parallel ranks, which hold the same parameters) tp apart, and a
//   pipeline's neighbours tp x cp x dp apart; sim places each
//   (sim::place_strided, sim::place_send).
// - Each virtual stage runs its own layers (layout.chunk_layers), the first
//   the embedding too and the last the output layer and loss; the stages are
//   laid out by the schedule (step/pipeline.h) and the span is the pipeline's
//   time: the slowest stage's m micro-batches are compute and TP (and CP)
//   communication, 2 (m v + pp - 1) sends the pipeline's sends, the rest the
//   bubble. With every stage alike this is Narayanan et al. SC'21 section
//   2.2's (pp - 1) / v bubble exactly (a test holds it).
// - The data-parallel reduction and Adam of each gradient bucket are the adam
//   workload in the step's gradient dtype, priced by the tuner
//   (step/dp_block.h) for every ZeRO stage: no formula of Adam here.
#include "step/compose.h"

#include <algorithm>
#include <optional>
#include <cmath>

#include "model/error.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "step/moe_block.h"
#include "step/pipeline.h"

namespace coconet::step {

namespace {

using model::OpKind;

// The attention core's kernels as selective recomputation runs them again:
// scores GEMM, softmax, the probabilities' dropout (a family with dropout:
// GPT), context GEMM.
constexpr int kAttentionCoreKernels = 3;
constexpr int kAttentionDropoutKernels = 1;
constexpr double kBwdElementwiseFactor = 2.0;  // a backward kernel reads the output gradient and a saved input, writes one gradient
constexpr double kBytesPerMB = 1e6;
constexpr double kSecondsPerUs = 1e-6;
constexpr double kFlopsPerTflop = 1e12;
constexpr int kEmbeddingFwdKernels = 1;  // the lookup (its TP reduction is a collective)
constexpr int kEmbeddingBwdKernels = 1;  // the gradient's scatter-add into the table

struct Shapes {
  std::int64_t tokens;   // b s / cp: a rank's tokens of its micro-batch
  std::int64_t hidden;   // h
  std::int64_t heads_per_gpu;
  std::int64_t kv_heads_per_gpu;
  std::int64_t head_dim;    // a query's and key's (MLA: nope + rope)
  std::int64_t v_head_dim;  // a value's (head_dim but with MLA)
  std::int64_t kv_cols_per_gpu;  // a rank's K and V columns per token: 2 kv D / t; MLA a (D + v) / t
  std::int64_t rope_dim;    // MLA: the rotary dimensions of a query head and of the shared key (0 otherwise)
  std::int64_t latent_cols; // MLA: the normed latents' columns, q_lora_rank + kv_lora_rank (0 otherwise)
  std::int64_t seq;      // s / cp: a rank's queries of each sequence
  std::int64_t full_seq; // s: the keys each query attends to
  int cp;
  std::int64_t micro_batch;
  std::int64_t ffn_per_gpu;
  std::int64_t vocab_per_gpu;
  int tp;
  model::DType dtype;
  Family family;
};

Shapes shapes_of(const ModelSpec& s, const Layout& l) {
  const auto& m = s.model;
  const std::int64_t seq = m.sequence / l.cp;
  constexpr std::int64_t kKvTensors = 2;  // keys and values
  const std::int64_t kv_cols = m.latent() ? m.heads * (m.head_dim + m.v_head_dim()) / l.tp
                                           : kKvTensors * m.kv_heads / l.tp * m.head_dim;
  return Shapes{s.training.micro_batch * seq, m.hidden,   m.heads / l.tp, m.kv_heads / l.tp, m.head_dim,
                m.v_head_dim(),               kv_cols,    m.latent() ? m.mla.qk_rope_head_dim : 0,
                m.latent() ? m.mla.q_lora_rank + m.mla.kv_lora_rank : 0,
                seq,                          m.sequence, l.cp,           s.training.micro_batch,
                m.ffn / l.tp,                 (m.vocabulary + l.tp - 1) / l.tp,
                l.tp,                         s.training.dtype, m.family()};
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

// The attention core: Q K^T and (softmax) V, batched over micro-batch x
// heads, `queries` rows against `keys` keys.
GemmPasses attention_core(const sim::Topology& t, const Shapes& x, std::int64_t queries, std::int64_t keys) {
  const std::int64_t batch = x.micro_batch * x.heads_per_gpu;
  const GemmPasses qk = linear(t, batch * queries, keys, x.head_dim, x.dtype);
  const GemmPasses av = linear(t, batch * queries, x.v_head_dim, keys, x.dtype);
  return {qk.fwd + av.fwd, qk.bwd + av.bwd};
}
GemmPasses attention_core(const sim::Topology& t, const Shapes& x) { return attention_core(t, x, x.seq, x.full_seq); }

double attention_dropout_bytes(const Shapes& x);

// Bytes the attention core's element-wise kernels move forward: the fused
// scaled masked softmax (read, write) and, in a family with dropout (GPT),
// the dropout on its probabilities (read, write, a 1-byte mask).
double scores_of(const Shapes& x, std::int64_t keys) {
  return double(x.micro_batch) * double(x.heads_per_gpu) * double(x.seq) * double(keys);
}
double attention_elementwise_bytes(const Shapes& x, std::int64_t keys) {
  const double e = model::bytes_of(x.dtype);
  return scores_of(x, keys) * (2 * e) + attention_dropout_bytes(x) * double(keys) / double(x.seq);
}
double attention_elementwise_bytes(const Shapes& x) { return attention_elementwise_bytes(x, x.full_seq); }

double ew(const sim::Topology& t, double bytes) { return sim::elementwise_body_us(t, bytes, bytes / 2); }


// What the layer programs leave out, priced by the bytes it moves (see
// workloads/megatron_layer_*.yaml, llama_layer_*.yaml, nemotron_layer_*.yaml),
// by what the family has (step/spec.h FamilyTraits). Dropout (GPT): forward,
// the attention probabilities' dropout (read, write, a 1-byte mask);
// backward, its backward. Biases (GPT): their gradients, column sums of the
// output gradients (db2, dbo over T x h, db1 over T x f/t, dbqkv over
// T x 3h/t). Rotary positions (Llama, Nemotron): RoPE on the queries and keys
// forward and on their gradients backward (read and write T x (a + kv) D / t).
// Every family: the two norms' parameter gradients (a LayerNorm's gamma and
// beta in one kernel, an RMSNorm's gamma; each reads the gradient and the
// normalised input). GPT: 1 kernel forward, 7 backward; Llama and Nemotron:
// 1 forward, 3 backward. MLA (mla_layer_*.yaml): RoPE on the rotary parts
// and the q/k concatenations as one kernel each way (rope_bytes), and its
// latents' two RMSNorm gammas too (over q_lora_rank and kv_lora_rank, on
// each rank's tokens): 1 forward, 5 backward.
constexpr int kAttentionDropoutFwdKernels = 1;  // the probabilities' dropout
constexpr int kAttentionDropoutBwdKernels = 1;  // its backward
constexpr int kBiasGradientKernels = 4;         // QKV, projection, FC1, FC2
constexpr int kRopeKernels = 1;                 // on q and k (forward) or dq and dk (backward)
constexpr int kNormGradientKernels = 2;         // one per norm
constexpr int kLatentNormGradientKernels = 2;   // MLA: the q and kv latents' norms

int left_out_fwd_kernels(const FamilyTraits& f) {
  return (f.dropout ? kAttentionDropoutFwdKernels : 0) + (f.learned_positions ? 0 : kRopeKernels);
}
int left_out_bwd_kernels(const FamilyTraits& f) {
  return (f.dropout ? kAttentionDropoutBwdKernels : 0) + (f.biases ? kBiasGradientKernels : 0) +
         (f.learned_positions ? 0 : kRopeKernels) + kNormGradientKernels +
         (f.attention == AttentionKind::mla ? kLatentNormGradientKernels : 0);
}
int attention_core_kernels(const FamilyTraits& f) {
  return kAttentionCoreKernels + (f.dropout ? kAttentionDropoutKernels : 0);
}

double attention_dropout_bytes(const Shapes& x) {
  if (!family_traits(x.family).dropout) return 0;
  const double e = model::bytes_of(x.dtype);
  return scores_of(x, x.seq) * (2 * e + 1);
}

// Rotary embeddings (Su et al. 2021, "RoFormer"): read and write the queries
// and keys. Multi-head latent attention rotates only the rotary parts, each
// query head's and the one key part every head shares (computed on every TP
// rank), then concatenates each head's query and key from their non-rotary
// and rotary parts (Megatron-core's MLASelfAttention, torch.cat): read and
// write the rank's queries and keys once more.
double rope_bytes(const Shapes& x) {
  if (family_traits(x.family).learned_positions) return 0;
  const double e = model::bytes_of(x.dtype);
  if (family_traits(x.family).attention == AttentionKind::mla) {
    const double rotary = double(x.heads_per_gpu + 1) * double(x.rope_dim);
    const double concatenated = 2 * double(x.heads_per_gpu) * double(x.head_dim);  // queries and keys
    return 2 * double(x.tokens) * (rotary + concatenated) * e;
  }
  return 2 * double(x.tokens) * double(x.heads_per_gpu + x.kv_heads_per_gpu) * double(x.head_dim) * e;
}

double parameter_gradient_bytes(const Shapes& x, bool sp) {
  const double e = model::bytes_of(x.dtype);
  const double th = double(x.tokens) * double(x.hidden) / (sp ? x.tp : 1);
  // two norms, each reading the gradient and the normalised input; MLA's latents' two likewise
  const double latents = double(x.tokens) * double(x.latent_cols) / (sp ? x.tp : 1);
  const double norms = 2 * 2 * th + 2 * latents;
  if (!family_traits(x.family).biases) return norms * e;
  const double per_gpu_h = double(x.tokens) * double(x.hidden) / x.tp;
  const double biases = 2 * th + double(x.tokens) * double(x.ffn_per_gpu) + 3 * per_gpu_h;
  return (biases + norms) * e;
}

// Context parallelism: the programs priced a rank's s/cp queries against its
// own s/cp keys; this is the attention to the other cp - 1 chunks' keys, one
// block each, one launch per block and kernel. With the attention as a flash
// kernel, causal load balancing (each rank holds chunks i and 2 cp - 1 - i of
// 2 cp) gives every rank (s/cp) s / 2 query-key pairs, cp times the (s/cp)^2
// / 2 of its own causal block, so the other blocks cost cp - 1 times the
// kernel the program priced, and keep no scores. Materialised, each block's
// scores are computed whole (the mask applied after): its GEMMs over the
// other chunks' keys and their scores' softmax (and dropout) bytes.
enum class Pass { fwd, bwd };
Kernels cp_extra_attention(const sim::Topology& t, const Shapes& x, const LayerPass& own, Pass pass) {
  const FamilyTraits& f = family_traits(x.family);
  const double blocks = double(x.cp - 1);
  if (own.flash_attention) return {blocks * own.attention_us, blocks * t.gpu.launch_us};
  const double launches = blocks * attention_core_kernels(f) * t.gpu.launch_us;
  const GemmPasses all = attention_core(t, x, x.seq, x.full_seq), mine = attention_core(t, x, x.seq, x.seq);
  const double extra_ew = ew(t, attention_elementwise_bytes(x, x.full_seq) - attention_elementwise_bytes(x, x.seq));
  if (pass == Pass::fwd) return {all.fwd - mine.fwd, extra_ew + launches};
  return {all.bwd - mine.bwd, kBwdElementwiseFactor * extra_ew + launches};
}

struct LayerCompute {
  Kernels fwd;
  Kernels bwd;
  Kernels attention_fwd;  // what selective recomputation runs again
  Kernels cp_extra_fwd;   // context parallelism: the attention to the other ranks' keys
  Kernels cp_extra_bwd;
  double fwd_tp_us = 0;
  double bwd_tp_us = 0;
};

// The layer programs' best schedules (step/layer_block.h), plus what they
// leave out by formula. Selective recomputation runs the attention core's
// forward again as the layer ran it: with flash attention its kernel (and
// under context parallelism its blocks against the other ranks' keys,
// Transformer Engine recomputing the whole core_attn); materialised, its
// GEMMs over every key and the softmax and dropout bytes.
LayerCompute layer_compute(const sim::Topology& t, const Shapes& x, const LayerBlock& tuned, bool sp) {
  const double launch = t.gpu.launch_us;
  const FamilyTraits& f = family_traits(x.family);
  // Forward and backward each move these bytes once (the dropout's backward twice: kBwdElementwiseFactor).
  const double drop = f.dropout ? ew(t, attention_dropout_bytes(x)) : 0.0;
  const double rope = f.learned_positions ? 0.0 : ew(t, rope_bytes(x));
  const int fwd_kernels = left_out_fwd_kernels(f);
  const int bwd_kernels = left_out_bwd_kernels(f);
  LayerCompute c;
  c.fwd.gemm_us = tuned.fwd.gemm_us;
  c.fwd.elementwise_us = tuned.fwd.elementwise_us + drop + rope + fwd_kernels * launch;
  c.fwd_tp_us = tuned.fwd.tp_us();
  c.bwd.gemm_us = tuned.bwd.gemm_us;
  c.bwd.elementwise_us = tuned.bwd.elementwise_us + kBwdElementwiseFactor * drop + rope +
                         ew(t, parameter_gradient_bytes(x, sp)) + bwd_kernels * launch;
  c.bwd_tp_us = tuned.bwd.tp_us();
  if (x.cp > 1) {
    c.cp_extra_fwd = cp_extra_attention(t, x, tuned.fwd, Pass::fwd);
    c.cp_extra_bwd = cp_extra_attention(t, x, tuned.bwd, Pass::bwd);
  }
  if (tuned.fwd.flash_attention) {
    c.attention_fwd = {tuned.fwd.attention_us + c.cp_extra_fwd.gemm_us, c.cp_extra_fwd.elementwise_us};
  } else {
    c.attention_fwd.gemm_us = attention_core(t, x).fwd;
    c.attention_fwd.elementwise_us = ew(t, attention_elementwise_bytes(x)) + attention_core_kernels(f) * launch;
  }
  return c;
}

// Context parallelism's K/V exchange for one layer, one micro-batch, left
// exposed (forward, backward). A rank's K/V chunk is b s/cp (2 kv D / t)
// elements. ring: cp - 1 steps, each sending the chunk it holds to the next
// rank of the CP group (tp apart) while it computes attention against it, so
// a step exposes what its send takes beyond one block of attention; the
// backward sends K/V and their gradients (twice the bytes) beside the
// backward's blocks. allgather (Llama 3): the forward all-gathers K/V over the
// group before attention and the backward reduce-scatters their gradients,
// neither overlapped.
struct CpExchange {
  double fwd_us = 0;
  double bwd_us = 0;
};
CpExchange cp_exchange(const sim::Topology& t, const Shapes& x, const Layout& l, CpComm comm, const LayerCompute& c,
                       CollectiveTimes& collectives) {
  if (l.cp <= 1) return {};
  const double chunk = double(x.tokens) * double(x.kv_cols_per_gpu) * model::bytes_of(x.dtype);
  const double steps = l.cp - 1;
  if (comm == CpComm::ring) {
    const sim::Placement peer = sim::place_send(t, l.tp);
    const double fwd_send = collectives.us(OpKind::send, chunk, peer);
    const double bwd_send = collectives.us(OpKind::send, 2 * chunk, peer);
    const double fwd_block = (c.cp_extra_fwd.gemm_us + c.cp_extra_fwd.elementwise_us) / steps;
    const double bwd_block = (c.cp_extra_bwd.gemm_us + c.cp_extra_bwd.elementwise_us) / steps;
    return {steps * std::max(0.0, fwd_send - fwd_block), steps * std::max(0.0, bwd_send - bwd_block)};
  }
  const sim::Placement group = sim::place_strided(t, l.cp, l.tp);
  return {collectives.us(OpKind::allgather, chunk * l.cp, group),
          collectives.us(OpKind::reducescatter, chunk * l.cp, group)};
}

// MLA's up-projections' forward (recompute mla_up_proj runs it again in the
// backward): the query latent to a x D and the key/value latent to a x
// (nope + v), column parallel over tp, and RoPE on the query's rotary part
// (read and write); 0 without MLA.
double up_projections_fwd_us(const sim::Topology& t, const Transformer& m, const Shapes& x) {
  if (!m.latent()) return 0;
  const double q = double(x.tokens) * double(x.heads_per_gpu) * double(x.rope_dim) * model::bytes_of(x.dtype);
  return linear(t, x.tokens, x.heads_per_gpu * x.head_dim, m.mla.q_lora_rank, x.dtype).fwd +
         linear(t, x.tokens, x.heads_per_gpu * (x.head_dim - x.rope_dim + x.v_head_dim), m.mla.kv_lora_rank,
                x.dtype).fwd +
         ew(t, 2 * q) + t.gpu.launch_us;
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

// The embedding on the first stage: the lookup of each token's row of its
// V/t-row slice (read and write T x h), then the TP ranks' partial rows
// reduced (Megatron-LM's VocabParallelEmbedding: an allreduce, a
// reduce-scatter with sequence parallelism); backward, the gradient's rows
// added into the table (read the gradient, read and write the rows).
struct Embedding {
  double fwd_compute_us = 0;
  double fwd_tp_us = 0;
  double bwd_compute_us = 0;
};
Embedding embedding(const sim::Topology& t, const Shapes& x, bool sp, CollectiveTimes& collectives) {
  const double rows = double(x.tokens) * double(x.hidden) * model::bytes_of(x.dtype);
  Embedding e;
  e.fwd_compute_us = ew(t, 2 * rows) + kEmbeddingFwdKernels * t.gpu.launch_us;
  e.fwd_tp_us = collectives.us(sp ? OpKind::reducescatter : OpKind::allreduce, rows, sim::place(t, x.tp));
  e.bwd_compute_us = ew(t, 3 * rows) + kEmbeddingBwdKernels * t.gpu.launch_us;
  return e;
}

// `bytes` in buckets of `bucket` bytes, each one collective.
double bucketed_us(CollectiveTimes& collectives, OpKind op, double bytes, double bucket, const sim::Placement& where,
                   double* last_bucket_us) {
  if (where.ranks <= 1 || bytes <= 0) {
    *last_bucket_us = 0;
    return 0;
  }
  const double full = std::floor(bytes / bucket);
  const double rest = bytes - full * bucket;
  const double one = full > 0 ? collectives.us(op, bucket, where) : 0;
  const double tail = rest > 0 ? collectives.us(op, rest, where) : 0;
  *last_bucket_us = rest > 0 ? tail : one;
  return full * one + tail;
}

// Collectives of `total` us in buckets, the last taking `last` us, that can
// start as the overlapped window of `window` us runs: what is left exposed.
double exposed_us(double total, double last, double window) {
  return last + std::max(0.0, total - last - window);
}

// Each gradient bucket's reduction and Adam step is the adam workload in the
// step's gradient dtype, priced by the tuner (step/dp_block.h; optimizer state
// replicated for ZeRO 0, sliced from ZeRO 1): the blocks of the last
// micro-batch run as its backward fills their buckets (parallel.dp_overlap),
// all but the last hidden behind it; with the state sliced their parameter
// all-gathers may also run beside the next step's first forward (the
// distributed optimizer's overlap_param_gather), so the window is the
// backward and that forward. Without dp_overlap they run after the backward.
// Adam per bucket needs no other bucket (gradient clipping by the global
// norm, which would, is not modelled). Returns the last block's time.
struct Blocks {
  double total_us = 0;
  double last_us = 0;
  std::string schedule;
};
Blocks price_blocks(const ModelSpec& s, const sim::Placement& group, double params, DpBlockPricer& pricer) {
  const model::DType grad = s.training.grad_reduce_dtype;
  const double per_bucket = std::max(1.0, std::floor(s.parallel.bucket_MB * kBytesPerMB / model::bytes_of(grad)));
  const double full = std::floor(params / per_bucket);
  const double rest = params - full * per_bucket;
  const bool sliced = s.parallel.zero >= 1;
  static const DpBlock kNone{};
  const DpBlock& one = full > 0 ? pricer.price(std::int64_t(per_bucket), group, sliced, grad) : kNone;
  const DpBlock& tail = rest > 0 ? pricer.price(std::int64_t(std::ceil(rest)), group, sliced, grad) : kNone;
  Blocks b;
  b.total_us = full * one.time_us + tail.time_us;
  b.schedule = full > 0 ? one.schedule : tail.schedule;
  if (rest > 0 && full > 0 && tail.schedule != one.schedule) b.schedule += " (last bucket " + tail.schedule + ")";
  b.last_us = rest > 0 ? tail.time_us : one.time_us;
  return b;
}

// The data-parallel reduction per ZeRO stage (Rajbhandari et al., SC'20,
// section 7) over the gradient-reduction group (data parallel x context
// parallel, tp apart). The last micro-batch's reduction and Adam are the
// tuned blocks for every stage. ZeRO 2 keeps only its slice of the
// gradients, so every earlier micro-batch's are reduce-scattered in its own
// backward too. ZeRO 3 (FSDP) also gathers each layer's parameters before
// its forward and again before its backward, prefetching the next layer's
// while one computes: per micro-batch the first layer's gather is exposed and
// the rest hide behind the micro-batch's compute (`mb_compute_us`) as far as
// it lasts; its earlier micro-batches' gradients are reduce-scattered as
// ZeRO 2's. Without dp_overlap nothing is hidden.
void price_data_parallel(const ModelSpec& s, const Layout& l, const sim::Topology& t, DpBlockPricer& pricer,
                         double mb_compute_us, StepReport& r) {
  Breakdown& b = r.breakdown;
  const sim::Placement group = sim::place_strided(t, l.dp * l.cp, l.tp);
  const int largest = largest_stage(s, l);  // the stage the two below are sized by, found once
  const double params = stage_parameters(s, l, largest);
  const Blocks dense = price_blocks(s, group, params, pricer);
  r.dp_total_us = dense.total_us;
  r.dp_schedule = dense.schedule;
  double last = dense.last_us;
  // The routed experts' gradients: their own buckets over the expert
  // data-parallel group (ranks ep x etp apart in Megatron-core's expert rank
  // order, etp-ep-edp-pp), reduced beside the dense ones' in the same window.
  const double experts = stage_expert_parameters(s, l, largest);
  if (experts > 0) {
    const Blocks e = price_blocks(s, sim::place_strided(t, l.edp, l.ep * l.etp), experts, pricer);
    r.dp_total_us += e.total_us;
    r.dp_schedule += "; experts " + e.schedule;
    last = std::max(last, e.last_us);
  }
  const double window = r.stage_bwd_us + (s.parallel.zero >= 1 ? r.stage_fwd_us : 0.0);
  b.dp_comm_us = s.parallel.dp_overlap ? exposed_us(r.dp_total_us, last, window) : r.dp_total_us;
  b.optimizer_us = 0;
  if (group.ranks <= 1 || s.parallel.zero < 2) return;
  const bool overlap = s.parallel.dp_overlap;
  const double m = double(l.micro_batches);
  CollectiveTimes& collectives = pricer.collectives();
  const sim::Placement expert_group = sim::place_strided(t, l.edp, l.ep * l.etp);
  const double grad = model::bytes_of(s.training.grad_reduce_dtype);
  const LayerShards shards = layer_shards(s, l, r.slowest_stage);
  // A collective of one layer's shards: its dense parameters over the
  // data-parallel group and, in a layer with experts, its routed experts'
  // over the expert data-parallel group (Megatron-core shards the two over
  // their own groups), one after the other; summed over the stage's layers.
  // `one`: a single layer's collective (a dense one where the stage has any).
  const auto per_layer = [&](OpKind op, double bytes_per_param, double* one) {
    const auto us = [&](double params, const sim::Placement& g) {
      return params > 0 && g.ranks > 1 ? collectives.us(op, params * bytes_per_param, g) : 0.0;
    };
    const double plain = us(shards.dense_layer, group);
    const double moe = us(shards.moe_layer, group) + us(shards.experts, expert_group);
    *one = shards.dense_layers > 0 ? plain : moe;
    return shards.dense_layers * plain + shards.moe_layers * moe;
  };
  // ZeRO 2 reduce-scatters each earlier micro-batch's gradients in buckets;
  // ZeRO 3 (Megatron-core's FSDP, a layer its unit) a layer at a time.
  double rs = 0;
  if (s.parallel.zero >= 3) {
    rs = per_layer(OpKind::reducescatter, grad, &last);
  } else {
    const double bucket = s.parallel.bucket_MB * kBytesPerMB;
    rs = bucketed_us(collectives, OpKind::reducescatter, params * grad, bucket, group, &last);
    if (experts > 0 && expert_group.ranks > 1) {
      double expert_last = 0;
      rs += bucketed_us(collectives, OpKind::reducescatter, experts * grad, bucket, expert_group, &expert_last);
      last = std::max(last, expert_last);
    }
  }
  r.dp_total_us += (m - 1) * rs;
  b.dp_comm_us += (m - 1) * (overlap ? exposed_us(rs, last, r.stage_bwd_us) : rs);
  if (s.parallel.zero < 3) return;
  double one_gather = 0;
  const double gathers = 2.0 * per_layer(OpKind::allgather, model::bytes_of(s.training.dtype), &one_gather);
  r.dp_total_us += m * gathers;  // forward and backward
  b.dp_comm_us += m * (overlap ? exposed_us(gathers, one_gather, mb_compute_us) : gathers);
}

// A layer with experts, one micro-batch on one GPU: the attention as the
// layer programs price it (their MLP at one column per TP rank: its GEMMs
// vanish, its TP collectives stay, as with sequence parallelism around
// Megatron-core's MoE layer), the experts as the MoE programs price them on
// the expert-parallel group (step/moe_block.h), and by formula what the
// programs leave out: the permutation of the rank's tokens into slot layout
// (read the tokens, write the slots) and back (read the slots, write each
// choice's row), each way a kernel, by the bytes they move as RoPE is priced,
// and the backward's routing-weight gradient (reading the output gradient and
// the chosen experts' outputs);
// the shared experts, a dense SwiGLU split over tp (its three GEMMs by
// sim::gemm_body_us, its element-wise product by its bytes); with etp > 1 the
// expert-TP group's all-gather of its tokens before the dispatch and
// reduce-scatter after the combine (counted with the all-to-alls).
constexpr int kPermutationKernels = 2;  // permute and unpermute, each pass
constexpr int kSwigluTensors = 3;       // gate, up, product

// The deepep dispatcher (moe.dispatcher; DeepSeek-V3 section 3.2.2, DeepEP's
// internode kernels): a dispatch in two hops, each an all-to-all priced by
// the simulator. First over
// the NICs between the ranks of one in-node index on the expert-parallel
// group's nodes, each token once per remote node it targets; then over
// NVLink within each node, every copy to its expert's rank. The remote nodes
// per token: K experts drawn evenly over the group's n nodes reach
// (n - 1)(1 - (1 - 1/n)^K) of the others on average, and at most
// max_nodes (n - 1)/n of them with node-limited routing (moe.max_nodes; the
// own node among the max_nodes by chance). The combine is the same two hops
// back. The two hops run one after the other (DeepEP overlaps them: an upper
// bound), on DeepEP's kernels (deepep_topology: the links' full rates,
// `collectives` prices on it). A pass runs a dispatch and a combine; returns one pass's
// all-to-all time, or -1 with the alltoall dispatcher or a group on one node
// (the MoE programs' all-to-alls stand: within a node DeepEP's intranode
// kernels move every copy over NVLink as the all-to-all does).
double node_limited_a2a_us(const ModelSpec& s, const sim::Topology& t, const MoeShape& ms, double tokens,
                           double slots, CollectiveTimes& collectives) {
  if (s.moe.dispatcher != Dispatcher::deepep) return -1;
  const sim::Placement group = sim::place_strided(t, ms.ep, ms.etp);
  if (group.nodes <= 1) return -1;
  const double n = group.nodes, k = double(ms.top_k);
  const double spread = (n - 1) * (1 - std::pow(1 - 1 / n, k));
  const double limit = s.moe.max_nodes > 0 ? std::min(double(s.moe.max_nodes), n) : n;
  const double remote = std::min(spread, limit * (n - 1) / n);
  const double row = double(ms.hidden) * model::bytes_of(ms.dtype);
  // An alltoall's bytes are one rank's slice, (P - 1)/P of which it sends.
  const double across = tokens * remote * row * n / (n - 1);
  const double within = slots * row;
  const double hops = collectives.us(OpKind::alltoall, across, sim::place_strided(t, group.nodes, t.node.gpus)) +
                      collectives.us(OpKind::alltoall, within, sim::place(t, group.per_node));
  constexpr double kAllToAllsPerPass = 2;  // dispatch and combine
  return kAllToAllsPerPass * hops;
}

// The SMs the dispatcher's kernels hold while they run, as a share of the
// GPU's (gpu.sms): deepep, DeepEP's normal (training) kernels on
// kDeepepSms; alltoall, NCCL's all-to-all on its channels, each
// sms_per_channel (sim/collective.h), as the simulator holds a collective's.
// Megatron-core's moe_deepep_num_sms, "historical default 20"
// (megatron/core/transformer/transformer_config.py, now
// moe_flex_dispatcher_num_sms); DeepEP's README: V2 cut "V3-like legacy
// training" from 24 SMs to 4-6, the ModelZoo's rows ran V1.
constexpr double kDeepepSms = 20;

double dispatcher_sm_share(const ModelSpec& s, const sim::Topology& t, const MoeShape& ms) {
  if (t.gpu.sms <= 0) return 0;
  const double held =
      s.moe.dispatcher == Dispatcher::deepep
          ? kDeepepSms
          : t.nccl.channels *
                sim::sms_per_channel(t, OpKind::alltoall, sim::place_strided(t, ms.ep, ms.etp));
  return std::clamp(held / t.gpu.sms, 0.0, 1.0);
}

// What a communication of `comm_us` exposes beside a computation of
// `compute_us` (its time alone) when the communication's kernels hold `held`
// of the SMs while they run: the computation runs at 1 - held of its speed
// meanwhile (the simulator's rule for a kernel beside a collective, taken
// proportional), so the pair lasts max(comm, compute + held x comm) and
// exposes max(comm - compute, held x comm) beyond the computation alone.
double overlapped_exposure_us(double comm_us, double compute_us, double held) {
  return std::max({0.0, comm_us - compute_us, held * comm_us});
}

// The share of a stage's passes that the 1F1B all-to-all overlap pairs:
// Megatron-core's merged schedule pairs a forward with a backward only in
// the steady state; its warm-up forwards (and as many cool-down backwards)
// run alone. Warm-ups (megatron/core/pipeline_parallel/schedules.py,
// get_pp_rank_microbatches): interleaved, (pp - rank - 1) x 2 + (v - 1) x pp
// plus one with the overlap; the last stage's, the fewest, are taken (a
// bound: earlier stages have 2 (pp - 1 - rank) more). Without interleaving
// one forward runs before the first backward. Of m x v passes each way.
double paired_share(const Layout& l) {
  const double passes = double(l.micro_batches) * l.virtual_stages;
  const double unpaired = l.virtual_stages > 1 ? double(l.virtual_stages - 1) * l.pp + 1 : 1.0;
  return std::clamp(1 - unpaired / passes, 0.0, 1.0);
}

struct MoeLayer {
  LayerTimes times;
  double mlp_fwd_us = 0;  // the MLP's forward compute (router to combine, shared experts), what recompute moe runs again
  std::string fwd_schedule, bwd_schedule;
};

MoeLayer moe_layer_times(const ModelSpec& s, const Layout& l, const sim::Topology& t, const Shapes& x, bool sp,
                         LayerBlockPricer& pricer, CollectiveTimes& collectives) {
  LayerShape attention = step_layer_shape(s, l);
  attention.ffn = l.tp;
  const LayerCompute c = layer_compute(t, x, pricer.price(attention), sp);
  const MoeShape ms = step_moe_shape(s, l);
  const MoeBlock& e = pricer.moe().price(ms);
  const double el = model::bytes_of(x.dtype), h = double(ms.hidden);
  const double tokens = double(ms.tokens) / ms.ep;                           // this rank's
  const double slots = double(ms.slots) * double(ms.experts) / ms.ep;        // the slots it fills
  const double permutation = ew(t, el * h * (tokens + slots)) + ew(t, 2 * el * h * slots) +
                             kPermutationKernels * t.gpu.launch_us;
  GemmPasses shared;
  double shared_ew = 0;
  if (s.moe.shared_experts > 0) {
    const std::int64_t f = s.moe.shared_experts * s.moe.expert_ffn / l.tp;
    const GemmPasses in = linear(t, x.tokens, f, x.hidden, x.dtype), down = linear(t, x.tokens, x.hidden, f, x.dtype);
    shared = {2 * in.fwd + down.fwd, 2 * in.bwd + down.bwd};
    shared_ew = ew(t, kSwigluTensors * double(x.tokens) * double(f) * el) + t.gpu.launch_us;
  }
  double etp_us = 0;
  if (l.etp > 1) {
    const double gathered = tokens * h * el;  // the group's tokens, each rank's share gathered
    const sim::Placement g = sim::place(t, l.etp);
    etp_us = collectives.us(OpKind::allgather, gathered, g) + collectives.us(OpKind::reducescatter, gathered, g);
  }
  const double a2a_pass = node_limited_a2a_us(s, t, ms, tokens, slots, pricer.moe().deepep_collectives());
  MoeLayer out;
  LayerTimes& m = out.times;
  m.fwd_gemm_us = c.fwd.gemm_us + c.cp_extra_fwd.gemm_us + e.fwd.gemm_us + shared.fwd;
  m.fwd_elementwise_us = c.fwd.elementwise_us + c.cp_extra_fwd.elementwise_us + e.fwd.elementwise_us + permutation +
                         shared_ew;
  m.fwd_tp_us = c.fwd_tp_us;
  m.fwd_a2a_us = (a2a_pass >= 0 ? a2a_pass : e.fwd.a2a_us()) + etp_us;
  m.bwd_gemm_us = c.bwd.gemm_us + c.cp_extra_bwd.gemm_us + e.bwd.gemm_us + shared.bwd;
  // The routing weights' gradient, left out of the backward program: a dot
  // product of the output gradient with each chosen expert's output per token.
  const double weights_grad = ew(t, el * h * tokens * double(1 + ms.top_k)) + t.gpu.launch_us;
  m.bwd_elementwise_us = c.bwd.elementwise_us + c.cp_extra_bwd.elementwise_us + e.bwd.elementwise_us + permutation +
                         weights_grad + kBwdElementwiseFactor * shared_ew;
  m.bwd_tp_us = c.bwd_tp_us;
  m.bwd_a2a_us = (a2a_pass >= 0 ? a2a_pass : e.bwd.a2a_us()) + etp_us;
  const double attn_fwd = c.fwd.gemm_us + c.cp_extra_fwd.gemm_us + c.fwd.elementwise_us + c.cp_extra_fwd.elementwise_us;
  out.mlp_fwd_us = m.fwd_gemm_us + m.fwd_elementwise_us - attn_fwd;
  if (s.moe.a2a_overlap && s.parallel.schedule != PipeSchedule::gpipe) {
    // The 1F1B all-to-all overlap (spec.h Moe::a2a_overlap): the forward of
    // one micro-batch and the backward of another as one merged schedule of
    // four pairs, each a communication beside a computation of the other
    // pass (DeepSeek-V3, arXiv:2412.19437, section 3.2.1 and figure 4):
    // the forward's attention beside the backward's combine, its dispatch
    // beside the backward's MLP, its MLP beside the backward's dispatch, its
    // combine beside the backward's attention. A pass's all-to-all time is
    // its dispatch and combine, half each; each is exposed by what it takes
    // beyond the computation it runs beside, that computation on the SMs the
    // dispatcher's kernels leave (overlapped_exposure_us). The warm-up
    // forwards and cool-down backwards run unpaired (paired_share). GPipe
    // pairs none (a search's GPipe layouts keep them exposed).
    const double attn_bwd = c.bwd.gemm_us + c.cp_extra_bwd.gemm_us + c.bwd.elementwise_us + c.cp_extra_bwd.elementwise_us;
    const double mlp_fwd = out.mlp_fwd_us;
    const double mlp_bwd = m.bwd_gemm_us + m.bwd_elementwise_us - attn_bwd;
    const double held = dispatcher_sm_share(s, t, ms);
    const auto beyond = [held](double comm, double compute) {
      return overlapped_exposure_us(comm, compute, held);
    };
    const double fwd_half = m.fwd_a2a_us / 2, bwd_half = m.bwd_a2a_us / 2;
    const double paired = paired_share(l);
    m.fwd_a2a_us = paired * (beyond(fwd_half, mlp_bwd) + beyond(fwd_half, attn_bwd)) +
                   (1 - paired) * m.fwd_a2a_us;
    m.bwd_a2a_us = paired * (beyond(bwd_half, attn_fwd) + beyond(bwd_half, mlp_fwd)) +
                   (1 - paired) * m.bwd_a2a_us;
  } else if (s.moe.shared_expert_overlap) {
    // The shared experts on a stream of their own (spec.h
    // Moe::shared_expert_overlap): each pass's all-to-alls expose what they
    // take beyond the shared experts' kernels of the same pass, those on the
    // SMs the dispatcher's kernels leave; the shared experts' time stays in
    // the compute.
    const double held = dispatcher_sm_share(s, t, ms);
    m.fwd_a2a_us = overlapped_exposure_us(m.fwd_a2a_us, shared.fwd + shared_ew, held);
    m.bwd_a2a_us = overlapped_exposure_us(m.bwd_a2a_us, shared.bwd + kBwdElementwiseFactor * shared_ew, held);
  }
  const CpExchange kv = cp_exchange(t, x, l, s.parallel.cp_comm, c, collectives);
  m.fwd_cp_us = kv.fwd_us;
  m.bwd_cp_us = kv.bwd_us;
  out.fwd_schedule = e.fwd.schedule;
  out.bwd_schedule = e.bwd.schedule;
  return out;
}

// FP8's delayed scaling (Transformer Engine's DelayedScaling recipe,
// reduce_amax on): at the end of each model chunk's forward the amaxes of its
// FP8 tensors are all-reduced (max) over the amax reduction group, the
// stage's data-, context- and tensor-parallel ranks (Megatron-core's
// get_amax_reduction_group with context parallelism), one fp32 per tensor:
// the input, weight and output gradient of each linear layer (QKV, the
// projection and the MLP's two, SwiGLU's gate and up as one GEMM). The
// reduction ends the forward on the compute stream: exposed.
constexpr int kFp8LinearsPerLayer = 4;
constexpr int kFp8TensorsPerLinear = 3;
constexpr double kAmaxBytes = 4;

double amax_allreduce_us(const sim::Topology& t, const Layout& l, int chunk_layers, CollectiveTimes& collectives) {
  const double bytes = double(std::max(1, chunk_layers)) * kFp8LinearsPerLayer * kFp8TensorsPerLinear * kAmaxBytes;
  return collectives.us(OpKind::allreduce, bytes, sim::place(t, l.tp * l.cp * l.dp));
}

// Every virtual stage's times per micro-batch, from one layer's and the
// embedding's and output layer's.
// `L` layers timed as `lt` added to `c`.
void add_layers(ChunkTimes& c, double L, const LayerTimes& lt, Recompute rc) {
  c.fwd_compute_us += L * (lt.fwd_gemm_us + lt.fwd_elementwise_us);
  c.fwd_tp_us += L * lt.fwd_tp_us;
  c.fwd_cp_us += L * lt.fwd_cp_us;
  c.fwd_a2a_us += L * lt.fwd_a2a_us;
  c.bwd_compute_us += L * (lt.bwd_gemm_us + lt.bwd_elementwise_us);
  c.bwd_tp_us += L * lt.bwd_tp_us;
  c.bwd_cp_us += L * lt.bwd_cp_us;
  c.bwd_a2a_us += L * lt.bwd_a2a_us;
  if (rc == Recompute::full) {
    c.recompute_us += L * (lt.fwd_gemm_us + lt.fwd_elementwise_us);
    c.recompute_tp_us += L * lt.fwd_tp_us;
    c.recompute_cp_us += L * lt.fwd_cp_us;
    c.recompute_a2a_us += L * lt.fwd_a2a_us;
  } else {
    c.recompute_us += L * lt.recompute_us;  // selective, mla_up_proj, moe: the kernels they run again
    if (rc == Recompute::moe) c.recompute_a2a_us += L * lt.fwd_a2a_us;  // and moe its all-to-alls (0 in a dense layer)
  }
}

// A multi-token prediction module (spec.h Transformer::mtp_layers) beside
// its transformer layer, one micro-batch: the lookup of the shifted tokens'
// embeddings (as the first stage's), the two RMSNorms (the hidden state's
// and the embeddings', each read and written forward, three passes
// backward), the projection of the concatenated 2h to h (column parallel over
// tp, Megatron-core's eh_proj) and a pass of the shared output layer with its
// loss.
constexpr int kMtpNorms = 2;
struct MtpModule {
  double fwd_compute_us = 0;
  double fwd_tp_us = 0;
  double bwd_compute_us = 0;
};
MtpModule mtp_module(const sim::Topology& t, const Shapes& x, bool sp, const Embedding& emb, const GemmPasses& out) {
  const double rows = double(x.tokens) / (sp ? x.tp : 1) * double(x.hidden) * model::bytes_of(x.dtype);
  const GemmPasses projection = linear(t, x.tokens, x.hidden / x.tp, 2 * x.hidden, x.dtype);
  MtpModule m;
  m.fwd_compute_us = emb.fwd_compute_us + kMtpNorms * (ew(t, 2 * rows) + t.gpu.launch_us) + projection.fwd + out.fwd;
  m.fwd_tp_us = emb.fwd_tp_us;
  m.bwd_compute_us = emb.bwd_compute_us + kMtpNorms * (ew(t, 3 * rows) + t.gpu.launch_us) + projection.bwd + out.bwd;
  return m;
}

std::vector<ChunkTimes> chunk_times(const ModelSpec& s, const Layout& l, const LayerTimes& lt, const LayerTimes& moe,
                                    const Embedding& emb, const GemmPasses& out,
                                    const MtpModule& mtp) {
  std::vector<ChunkTimes> chunks;
  const int n = l.chunks();
  chunks.reserve(std::size_t(n));
  const Recompute rc = s.parallel.recompute;
  for (int k = 0; k < n; ++k) {
    ChunkTimes c;
    c.layers = l.chunk_layers[std::size_t(k)];
    const int experts = moe_layers_of_chunk(s, l, k);
    add_layers(c, c.layers - experts, lt, rc);
    add_layers(c, experts, moe, rc);
    if (k == 0) {
      c.fwd_compute_us += emb.fwd_compute_us;
      c.fwd_tp_us += emb.fwd_tp_us;
      c.bwd_compute_us += emb.bwd_compute_us;
    }
    if (k == n - 1) {
      c.fwd_compute_us += out.fwd;
      c.bwd_compute_us += out.bwd;
      const double depths = double(s.model.mtp_layers);
      add_layers(c, depths, s.moe.on() ? moe : lt, rc);
      c.fwd_compute_us += depths * mtp.fwd_compute_us;
      c.fwd_tp_us += depths * mtp.fwd_tp_us;
      c.bwd_compute_us += depths * mtp.bwd_compute_us;
    }
    chunks.push_back(c);
  }
  return chunks;
}

}  // namespace

double StepReport::stage_layers() const { return layout.layers_of_stage(slowest_stage); }

namespace {
template <typename F>
double over_slowest_stage(const StepReport& r, F part) {
  double sum = 0;
  for (int c = 0; c < r.layout.virtual_stages; ++c)
    sum += part(r.chunks[std::size_t(c * r.layout.pp + r.slowest_stage)]);
  return sum;
}
}  // namespace

double StepReport::stage_fwd_tp_us() const {
  return over_slowest_stage(*this, [](const ChunkTimes& c) { return c.fwd_tp_us; });
}
double StepReport::stage_bwd_tp_us() const {
  return over_slowest_stage(*this, [](const ChunkTimes& c) { return c.bwd_tp_us + c.recompute_tp_us; });
}
double StepReport::stage_recompute_us() const {
  return over_slowest_stage(
      *this, [](const ChunkTimes& c) { return c.recompute_us + c.recompute_tp_us + c.recompute_cp_us; });
}
double StepReport::stage_a2a_us() const {
  return over_slowest_stage(*this, [](const ChunkTimes& c) { return c.a2a_us(); });
}
double StepReport::stage_recompute_tp_us() const {
  return over_slowest_stage(*this, [](const ChunkTimes& c) { return c.recompute_tp_us; });
}

ChunkSteps chunk_steps(const StepReport& r) {
  ChunkSteps c;
  c.fwd.reserve(r.chunks.size());
  c.bwd.reserve(r.chunks.size());
  for (const ChunkTimes& ch : r.chunks) {
    c.fwd.push_back(ch.fwd_us() + r.send_us);
    c.bwd.push_back(ch.bwd_us() + r.send_us);
  }
  return c;
}

namespace {

// The parts that follow from the pipeline's span: each chunk step on the
// critical path sends once forward and once backward (the m v steps of every
// micro-batch's chunks and the pp - 1 of the fill and the drain: pp_p2p_us);
// what else the span holds beyond the slowest stage's m micro-batches is the
// bubble. Then the step time and the rates over it.
void set_span(StepReport& r, const ModelSpec& s, double span_us) {
  Breakdown& b = r.breakdown;
  const Layout& l = r.layout;
  r.pipeline_span_us = span_us;
  b.pp_bubble_us = span_us - double(l.micro_batches) * (r.stage_fwd_us + r.stage_bwd_us) - b.pp_p2p_us;
  r.step_us = b.total_us();
  const double per_gpu_tflops = 1.0 / (r.step_us * kSecondsPerUs) / l.gpus / kFlopsPerTflop;
  r.model_tflops_per_gpu = r.model_flops * per_gpu_tflops;
  r.hardware_tflops_per_gpu = r.hardware_flops * per_gpu_tflops;
  r.eq3_tflops_per_gpu = r.eq3_flops * per_gpu_tflops;
  r.mfu = r.peak_tflops > 0 ? r.model_tflops_per_gpu / r.peak_tflops : 0.0;
  r.tokens_per_s = double(s.training.global_batch) * double(s.model.sequence) / (r.step_us * kSecondsPerUs);
}

}  // namespace

void lay_out_pipeline(StepReport& r) {
  if (r.pipeline_laid_out) return;
  const Layout& l = r.layout;
  const ChunkSteps steps = chunk_steps(r);
  set_span(r, r.spec, span_us(stage_orders(r.spec.parallel.schedule, l.pp, l.virtual_stages, int(l.micro_batches)),
                      l.virtual_stages, int(l.micro_batches), steps.fwd, steps.bwd));
  r.pipeline_laid_out = true;
}

StepReport predict_step(const ModelSpec& s, const sim::Topology& t, DpBlockPricer* dp, LayerBlockPricer* layer_pricer) {
  StepReport r = predict_step_bound(s, t, dp, layer_pricer);
  lay_out_pipeline(r);
  return r;
}

StepReport predict_step_bound(const ModelSpec& s, const sim::Topology& t, DpBlockPricer* dp,
                              LayerBlockPricer* layer_pricer) {
  const Layout l = resolve_layout(s, t);
  StepReport r = predict_step_bound(s, SizedLayout{l, memory_per_gpu(s, l, t)}, t, dp, layer_pricer);
  r.spec = s;
  return r;
}

StepReport predict_step_bound(const ModelSpec& s, const SizedLayout& sized, const sim::Topology& t, DpBlockPricer* dp,
                              LayerBlockPricer* layer_pricer) {
  StepReport r;
  r.topology = t.name;
  const Layout& l = sized.layout;
  r.layout = l;
  const bool sp = sequence_parallel_on(s.parallel, l);
  const Shapes x = shapes_of(s, l);

  // One layer, one micro-batch.
  LayerShape shape = step_layer_shape(s, l);
  // A model whose every layer has experts has no dense layer to price: its
  // `layer` is the MoE layer's attention (the layer programs' MLP at one
  // column per TP rank, moe_layer_times), the one tuning both use.
  if (moe_layers(s) == s.model.layers) shape.ffn = l.tp;
  std::optional<LayerBlockPricer> own_layers;  // without the caller's cache, one for this step
  const LayerBlock& tuned = (layer_pricer != nullptr ? *layer_pricer : own_layers.emplace(t)).price(shape);
  std::optional<DpBlockPricer> own_dp;  // likewise
  DpBlockPricer& dp_pricer = dp != nullptr ? *dp : own_dp.emplace(t);
  CollectiveTimes& collectives = dp_pricer.collectives();
  const LayerCompute c = layer_compute(t, x, tuned, sp);
  r.layer_fwd_schedule = tuned.fwd.schedule;
  r.layer_bwd_schedule = tuned.bwd.schedule;
  LayerTimes& lt = r.layer;
  lt.fwd_gemm_us = c.fwd.gemm_us + c.cp_extra_fwd.gemm_us;
  lt.fwd_elementwise_us = c.fwd.elementwise_us + c.cp_extra_fwd.elementwise_us;
  lt.fwd_tp_us = c.fwd_tp_us;
  lt.bwd_gemm_us = c.bwd.gemm_us + c.cp_extra_bwd.gemm_us;
  lt.bwd_elementwise_us = c.bwd.elementwise_us + c.cp_extra_bwd.elementwise_us;
  lt.bwd_tp_us = c.bwd_tp_us;
  const CpExchange kv = cp_exchange(t, x, l, s.parallel.cp_comm, c, collectives);
  lt.fwd_cp_us = kv.fwd_us;
  lt.bwd_cp_us = kv.bwd_us;
  // What a layer runs again in its backward, by recomputation: its MLP's
  // forward only with experts (recompute moe; 0 in a dense layer).
  const auto recomputed = [&](const LayerTimes& layer, double mlp_fwd_us) {
    switch (s.parallel.recompute) {
      case Recompute::none: return 0.0;
      case Recompute::selective: return c.attention_fwd.gemm_us + c.attention_fwd.elementwise_us;
      case Recompute::full: return layer.fwd_us() + layer.fwd_cp_us;
      case Recompute::mla_up_proj: return up_projections_fwd_us(t, s.model, x);
      case Recompute::moe: return mlp_fwd_us;
    }
    return 0.0;
  };
  lt.recompute_us = recomputed(lt, 0.0);

  // Every virtual stage, one micro-batch; the slowest stage sets the pace.
  if (s.moe.on()) {
    const MoeLayer moe =
        moe_layer_times(s, l, t, x, sp, layer_pricer != nullptr ? *layer_pricer : *own_layers, collectives);
    r.moe_layer = moe.times;
    r.moe_fwd_schedule = moe.fwd_schedule;
    r.moe_bwd_schedule = moe.bwd_schedule;
    r.moe_layer.recompute_us = recomputed(r.moe_layer, moe.mlp_fwd_us);
  }
  const Embedding emb = embedding(t, x, sp, collectives);
  const GemmPasses out = output_layer(t, x);
  const MtpModule mtp = s.model.mtp_layers > 0 ? mtp_module(t, x, sp, emb, out) : MtpModule{};
  r.chunks = chunk_times(s, l, lt, r.moe_layer, emb, out, mtp);
  if (s.training.fp8)
    for (ChunkTimes& c : r.chunks) c.fwd_amax_us = amax_allreduce_us(t, l, c.layers, collectives);
  double slowest = -1;
  for (int stage = 0; stage < l.pp; ++stage) {
    double fwd = 0, bwd = 0;
    for (int ch = 0; ch < l.virtual_stages; ++ch) {
      fwd += r.chunks[std::size_t(ch * l.pp + stage)].fwd_us();
      bwd += r.chunks[std::size_t(ch * l.pp + stage)].bwd_us();
    }
    if (fwd + bwd > slowest) {
      slowest = fwd + bwd;
      r.slowest_stage = stage;
      r.stage_fwd_us = fwd;
      r.stage_bwd_us = bwd;
    }
  }
  const double m = double(l.micro_batches);
  Breakdown& b = r.breakdown;
  const double tp_mb = over_slowest_stage(r, [](const ChunkTimes& ch) { return ch.tp_us(); });
  const double cp_mb = over_slowest_stage(r, [](const ChunkTimes& ch) { return ch.cp_us(); });
  const double a2a_mb = r.stage_a2a_us();
  const double mb_us = r.stage_fwd_us + r.stage_bwd_us;
  b.tp_comm_us = m * tp_mb;
  b.cp_comm_us = m * cp_mb;
  b.ep_comm_us = m * a2a_mb;
  b.compute_us = m * (mb_us - tp_mb - cp_mb - a2a_mb);

  // The pipeline's sends; its span bounded below here, laid out by lay_out_pipeline.
  if (l.pp > 1) {
    const double act = double(x.tokens) * double(x.hidden) * model::bytes_of(x.dtype) / l.tp;  // scatter-gather over tp
    r.send_us = collectives.us(OpKind::send, act, sim::place_send(t, l.tp * l.cp * l.dp));
  }
  b.pp_p2p_us = l.pp > 1 ? (m * l.virtual_stages + double(l.pp - 1)) * 2 * r.send_us : 0.0;
  const ChunkSteps steps = chunk_steps(r);
  price_data_parallel(s, l, t, dp_pricer, mb_us - tp_mb - cp_mb - a2a_mb, r);

  r.model_flops = model_flops(s);
  r.hardware_flops = hardware_flops(s);
  r.eq3_flops = megatron_eq3_flops(s);
  // A cpu topology's rates are calibrated achieved rates, not a peak: no MFU.
  if (t.device == sim::Device::gpu)
    r.peak_tflops = s.training.fp8 && t.gpu.tflops_fp8 ? *t.gpu.tflops_fp8 : t.gpu.gemm_tflops(s.training.dtype);
  set_span(r, s, span_lower_bound_us(l.pp, l.virtual_stages, int(l.micro_batches), steps.fwd, steps.bwd));
  const AttentionMemory kept = tuned.fwd.flash_attention ? AttentionMemory::flash : AttentionMemory::scores;
  r.memory = kept == allowed_attention_memory(s) ? sized.allowed_memory : memory_per_gpu(s, l, t, kept);
  return r;
}

}  // namespace coconet::step
