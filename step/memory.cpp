// Memory per GPU. Activations follow Korthikanti et al. 2022, Table 2 (bytes
// per layer per micro-batch, 16-bit activations, 1-byte dropout masks,
// ffn = 4h): sbh(34 + 5as/h) without parallelism, sbh(10 + 24/t + 5as/(ht))
// with tensor parallelism, sbh/t (34 + 5as/h) with sequence parallelism too.
// Its terms, tensor by tensor, follow the model's shapes (docs/step.md):
// replicated over the TP ranks R = 2sbh (each norm's input) x 2 + 2sbh (QKV's
// input) + 2sbh (the MLP's input) + sbh x 2 (GPT's two dropout masks after the
// projection and the MLP); split over them Q, K, V 2sb(a + 2kv)D, the
// projection's input 2sbaD, the MLP's 4sbf (GELU's input and output; squared
// ReLU's relu(u) and its square) or 6sbf (SwiGLU's gate, up and their
// product), and the scores 5as^2b (GPT: softmax output 2, dropout mask 1,
// dropout output 2) or 2as^2b (Llama, Nemotron: no dropout). Multi-head
// latent attention (MLA) keeps Q, K, V at its own widths, 2sb a (2 (nope +
// rope) + v), its projection's input 2sb a v, and its latents replicated on
// every rank (latent_bytes).
// Flash attention keeps no scores but each query's log-sum-exp per head, 4asb
// bytes (fp32), split over the TP ranks. Selective recomputation drops the
// scores term (and flash attention's statistics: the recomputed forward makes
// them again); full recomputation
// keeps only the layer input, 2sbh (2sbh/t with sequence parallelism), plus
// one layer's working set while it recomputes. Each pipeline stage holds its
// chunks in flight at the schedule's peak (step/pipeline.h chunks_in_flight:
// pp - stage micro-batches under 1F1B, 1 + (pp-1)/(pp v) times the stage's
// layers' worth more interleaved at the first, Korthikanti section 4.2.2; all
// m under GPipe), each its own layers' share; the last also the logits; the
// largest stage is the GPU's. Context parallelism gives each rank s / cp of
// every sequence's tokens, so every activation term is divided by cp (the
// scores too: a rank's queries against the keys of one chunk at a time).
#include "step/memory.h"

#include <algorithm>

#include "step/pipeline.h"

namespace coconet::step {

namespace {

constexpr double kBytesPerGB = 1e9;
constexpr double kAdamStateBytes = 12;  // fp32 master weights, first and second moments
constexpr double kLogitBytes = 4;       // fp32 logits of the cross-entropy (Korthikanti eq. for the output layer)

constexpr double kActivationBytes = 2;  // 16-bit activations
constexpr double kMaskBytes = 1;        // a dropout mask
constexpr double kDropoutScoreBytes = 5;  // per score: softmax output 2, dropout mask 1, dropout output 2
constexpr double kScoreBytes = 2;         // per score: softmax output (no dropout)
constexpr double kGeluMlpTensors = 2;     // GELU's input and output, f wide
constexpr double kSwigluMlpTensors = 3;   // gate, up, silu(gate) x up, f wide
// relu(u) (kept by relu for its backward and by the square for its own) and
// relu(u)^2 (FC2's input, for its wgrad), f wide; the backward program reads
// FC1's output u and FC2's input, the same two.
constexpr double kSquaredReluMlpTensors = 2;

double mlp_tensors(FfnType f) {
  switch (f) {
    case FfnType::gelu: return kGeluMlpTensors;
    case FfnType::swiglu: return kSwigluMlpTensors;
    case FfnType::squared_relu: return kSquaredReluMlpTensors;
  }
  return kGeluMlpTensors;
}
constexpr double kFlashStatBytes = 4;   // per query and head: the softmax's fp32 log-sum-exp (FlashAttention-2)

// The attention core's saved state per micro-batch, before the TP split.
double attention_state_bytes(const ModelSpec& s, const Layout& l, AttentionMemory a) {
  const auto& m = s.model;
  const double queries = double(m.sequence) / l.cp * double(s.training.micro_batch) * double(m.heads);
  if (a == AttentionMemory::flash) return kFlashStatBytes * queries;
  return (m.traits().dropout ? kDropoutScoreBytes : kScoreBytes) * double(m.sequence) / l.cp * queries;
}

// An MoE layer's MLP kept for the backward on one GPU (in place of the dense
// MLP's 3 e sb f / t): the dispatched tokens the grouped GEMMs read (the
// hottest expert's share: every expert padded to it), the gate, up and their
// product at expert_ffn / etp, the combined outputs before the weighted sum,
// the router's fp32 probabilities, and the shared experts as a dense SwiGLU
// split over tp.
constexpr double kRouterProbBytes = 4;
double moe_mlp_bytes(const ModelSpec& s, const Layout& l) {
  const Moe& m = s.moe;
  const double e = kActivationBytes, h = double(s.model.hidden);
  const double tokens = double(s.model.sequence) / l.cp * double(s.training.micro_batch) / l.tp * l.etp;
  const double routed = tokens * double(m.top_k) * m.hottest_share();
  const double experts = routed * e * (2 * h + kSwigluMlpTensors * double(m.expert_ffn) / l.etp);
  const double router = tokens * double(m.experts) * kRouterProbBytes;
  const double shared = kSwigluMlpTensors * e * tokens * l.tp / l.etp * double(m.shared_experts) *
                        double(m.expert_ffn) / l.tp;
  return experts + router + shared;
}

// Multi-head latent attention keeps its latents for the backward, on every
// TP rank (the down-projections are duplicated): the two down-projections'
// outputs (the latents' RMSNorm inputs, q_lora_rank and kv_lora_rank + rope)
// and the normed latents (the up-projections' inputs, q_lora_rank and
// kv_lora_rank). Their Q, K and V count with the split terms (qkv_width).
double latent_bytes(const Transformer& m, double sb) {
  if (!m.latent()) return 0;
  const Mla& a = m.mla;
  return kActivationBytes * sb * double(2 * a.q_lora_rank + 2 * a.kv_lora_rank + a.qk_rope_head_dim);
}

double full_layer_bytes(const ModelSpec& s, const Layout& l, bool drop_attention, AttentionMemory a,
                        bool moe = false) {
  const auto& m = s.model;
  const double sb = double(m.sequence) / l.cp * double(s.training.micro_batch), e = kActivationBytes;
  const double h = double(m.hidden);
  const double t = l.tp;
  // 2 norm inputs, QKV and MLP inputs, and the two dropout masks of a family
  // with dropout; MLA's latents (latent_bytes)
  const double replicated = sb * h * (4 * e + (m.traits().dropout ? 2 * kMaskBytes : 0.0)) + latent_bytes(m, sb);
  const double mlp = moe ? 0.0 : mlp_tensors(m.ffn_type) * e * sb * double(m.ffn);
  const double split = e * sb * double(m.qkv_width()) + e * sb * double(m.context_width()) + mlp;
  const double scores = drop_attention ? 0.0 : attention_state_bytes(s, l, a);
  const double experts = moe ? moe_mlp_bytes(s, l) : 0.0;
  if (s.parallel.sequence_parallel) return (replicated + split + scores) / t + experts;
  return replicated + (split + scores) / t + experts;
}


// A stage's multi-token prediction modules less their experts (spec.h
// Transformer::mtp_layers): each its layer's dense part, the projection 2h x
// h and the two RMSNorms; and, on a stage without the first's embedding, a
// copy of it for the shifted tokens (Megatron-core builds the embedding on
// the post-process stage when it holds MTP).
double mtp_parameters(const ModelSpec& s, const Layout& l, int stage) {
  const double depths = mtp_layers_of_stage(s, l, stage);
  if (depths == 0) return 0;
  const Transformer& m = s.model;
  const double h = double(m.hidden);
  const double layer = s.moe.on() ? moe_layer_dense_parameters(s) : layer_parameters(m);
  const double module = layer + 2 * h * h + 2 * norm_parameters(m);
  const double embedding = l.pp > 1 ? double(m.vocabulary) * h : 0.0;
  return (depths * module + embedding) / l.tp;
}
}  // namespace

double stage_parameters(const ModelSpec& s, const Layout& l, int stage) {
  const double moe = moe_layers_of_stage(s, l, stage);
  const double dense = l.layers_of_stage(stage) - moe;
  const double embedding = double(s.model.vocabulary) * double(s.model.hidden) / l.tp;
  // The first stage holds the embedding, the last the output layer (a copy of
  // the embedding when tied); one stage holding both holds one matrix when
  // tied, two when not; a middle stage neither.
  double matrices = 0;
  if (l.pp == 1) matrices = s.model.tied_embeddings ? 1.0 : 2.0;
  else if (stage == 0 || stage == l.pp - 1) matrices = 1.0;
  const double moe_dense = moe > 0 ? moe * moe_layer_dense_parameters(s) / l.tp : 0.0;
  return dense * layer_parameters(s.model) / l.tp + moe_dense + matrices * embedding +
         mtp_parameters(s, l, stage);
}

int largest_stage(const ModelSpec& s, const Layout& l) {
  int best = 0;
  double most = -1;
  for (int stage = 0; stage < l.pp; ++stage) {
    const double p = stage_parameters(s, l, stage) + stage_expert_parameters(s, l, stage);
    if (p > most) most = p, best = stage;
  }
  return best;
}

double stage_parameters(const ModelSpec& s, const Layout& l) { return stage_parameters(s, l, largest_stage(s, l)); }

double stage_expert_parameters(const ModelSpec& s, const Layout& l, int stage) {
  const double moe = expert_layers_of_stage(s, l, stage);
  return moe > 0 ? moe * expert_parameters(s) / (double(l.ep) * l.etp) : 0.0;
}

double stage_expert_parameters(const ModelSpec& s, const Layout& l) {
  return stage_expert_parameters(s, l, largest_stage(s, l));
}

LayerShards layer_shards(const ModelSpec& s, const Layout& l, int stage) {
  LayerShards x;
  // The stage's multi-token prediction layers are layers like its others.
  x.moe_layers = expert_layers_of_stage(s, l, stage);
  x.dense_layers = l.layers_of_stage(stage) + mtp_layers_of_stage(s, l, stage) - x.moe_layers;
  x.dense_layer = layer_parameters(s.model) / l.tp;
  if (s.moe.on()) {
    x.moe_layer = moe_layer_dense_parameters(s) / l.tp;
    x.experts = expert_parameters(s) / (double(l.ep) * l.etp);
  }
  return x;
}

AttentionMemory allowed_attention_memory(const ModelSpec& s) {
  return s.training.flash_attention ? AttentionMemory::flash : AttentionMemory::scores;
}

double layer_activation_bytes(const ModelSpec& s, const Layout& l, AttentionMemory a, bool moe) {
  switch (s.parallel.recompute) {
    case Recompute::none: return full_layer_bytes(s, l, false, a, moe);
    case Recompute::selective: return full_layer_bytes(s, l, true, a, moe);
    case Recompute::mla_up_proj: {
      // Q, K and V (a (2 D + v) per token, split over tp) are rebuilt from
      // the latents, which stay.
      const double sb = double(s.model.sequence) / l.cp * double(s.training.micro_batch);
      return full_layer_bytes(s, l, false, a, moe) - kActivationBytes * sb * double(s.model.qkv_width()) / l.tp;
    }
    case Recompute::moe:  // an MoE layer keeps its MLP's input (counted in the layer) and nothing of the MLP
      return full_layer_bytes(s, l, false, a, moe) - (moe ? moe_mlp_bytes(s, l) : 0.0);
    case Recompute::full: {
      const double sbh = double(s.model.sequence) / l.cp * double(s.training.micro_batch) * double(s.model.hidden);
      return 2.0 * sbh / (s.parallel.sequence_parallel ? l.tp : 1);
    }
  }
  return 0;
}

Memory memory_per_gpu(const ModelSpec& s, const Layout& l, const sim::Topology& t) {
  return memory_per_gpu(s, l, t, allowed_attention_memory(s));
}

Memory memory_per_gpu(const ModelSpec& s, const Layout& l, const sim::Topology& t, AttentionMemory a) {
  Memory m;
  // ZeRO shards over the data-parallel ranks and the context-parallel ones,
  // which hold the same parameters (Megatron-LM's distributed optimizer
  // shards over the data-parallel group with context parallelism).
  const double shards = double(l.dp) * l.cp;
  const int zero = s.parallel.zero;
  const double per_layer = layer_activation_bytes(s, l, a);
  const double per_moe_layer = s.moe.on() ? layer_activation_bytes(s, l, a, true) : per_layer;
  double working = 0;  // full recomputation re-materialises one layer at a time
  if (s.parallel.recompute == Recompute::full) working = full_layer_bytes(s, l, false, a, s.moe.on());
  if (s.parallel.recompute == Recompute::moe) working = moe_mlp_bytes(s, l);
  const double logits = kLogitBytes * double(s.model.sequence) / l.cp * double(s.training.micro_batch) *
                        double(s.model.vocabulary) / l.tp;
  // The routed experts are reduced and sharded over the expert data-parallel
  // ranks (Megatron-core's distributed optimizer keeps a separate buffer for
  // the expert parameters over the expert data-parallel group).
  const double expert_shards = double(l.edp);
  double most = -1;
  for (int stage = 0; stage < l.pp; ++stage) {
    const double params = stage_parameters(s, l, stage);
    const double experts = stage_expert_parameters(s, l, stage);
    // A ZeRO stage's divisor of the dense and of the expert parameters.
    const auto sharded = [&](int from) {
      return params / (zero >= from ? shards : 1) + experts / (zero >= from ? expert_shards : 1);
    };
    // ZeRO 3 gathers one layer's parameters at a time for its forward or
    // backward: the stage's largest layer.
    const double gathered = zero >= 3 ? layer_shards(s, l, stage).largest() : 0.0;
    const double weights = (sharded(3) + gathered) * model::bytes_of(s.training.dtype);
    const double gradients = sharded(2) * model::bytes_of(s.training.grad_dtype);
    const double optimizer = sharded(1) * kAdamStateBytes;
    const double chunks = chunks_in_flight(s.parallel.schedule, l.pp, l.virtual_stages, int(l.micro_batches), stage);
    // The multi-token prediction layers count as the stage's layers; each
    // depth's logits beside the model's.
    const double mtp = mtp_layers_of_stage(s, l, stage);
    const double moe = expert_layers_of_stage(s, l, stage);
    const double stage_layer_bytes = per_layer * (l.layers_of_stage(stage) + mtp - moe) + per_moe_layer * moe;
    double activations = stage_layer_bytes / l.virtual_stages * chunks + working;
    if (stage == l.pp - 1) activations += logits * (1 + mtp);
    const double total = weights + gradients + optimizer + activations;
    if (total <= most) continue;
    most = total;
    m.weights_GB = weights / kBytesPerGB;
    m.gradients_GB = gradients / kBytesPerGB;
    m.optimizer_GB = optimizer / kBytesPerGB;
    m.activations_GB = activations / kBytesPerGB;
  }
  m.capacity_GB = t.gpu.memory_GB;
  m.reserved_GB = m.capacity_GB > 0 ? t.gpu.reserved_GB.value_or(kDefaultReservedGB) : 0.0;
  return m;
}

}  // namespace coconet::step
