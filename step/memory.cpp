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
// dropout output 2) or 2as^2b (Llama, Nemotron: no dropout).
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

double full_layer_bytes(const ModelSpec& s, const Layout& l, bool drop_attention, AttentionMemory a) {
  const auto& m = s.model;
  const double sb = double(m.sequence) / l.cp * double(s.training.micro_batch), e = kActivationBytes;
  const double h = double(m.hidden), ad = double(m.attention_width()), kvd = double(m.kv_width());
  const double t = l.tp;
  // 2 norm inputs, QKV and MLP inputs, and the two dropout masks of a family with dropout
  const double replicated = sb * h * (4 * e + (m.traits().dropout ? 2 * kMaskBytes : 0.0));
  const double mlp = mlp_tensors(m.ffn_type) * e * sb * double(m.ffn);
  const double split = e * sb * (ad + 2 * kvd) + e * sb * ad + mlp;
  const double scores = drop_attention ? 0.0 : attention_state_bytes(s, l, a);
  if (s.parallel.sequence_parallel) return (replicated + split + scores) / t;
  return replicated + (split + scores) / t;
}

}  // namespace

double stage_parameters(const ModelSpec& s, const Layout& l, int stage) {
  const double layers = l.layers_of_stage(stage);
  const double embedding = double(s.model.vocabulary) * double(s.model.hidden) / l.tp;
  // The first stage holds the embedding, the last the output layer (a copy of
  // the embedding when tied); one stage holding both holds one matrix when
  // tied, two when not; a middle stage neither.
  double matrices = 0;
  if (l.pp == 1) matrices = s.model.tied_embeddings ? 1.0 : 2.0;
  else if (stage == 0 || stage == l.pp - 1) matrices = 1.0;
  return layers * layer_parameters(s.model) / l.tp + matrices * embedding;
}

double stage_parameters(const ModelSpec& s, const Layout& l) {
  double most = 0;
  for (int stage = 0; stage < l.pp; ++stage) most = std::max(most, stage_parameters(s, l, stage));
  return most;
}

AttentionMemory allowed_attention_memory(const ModelSpec& s) {
  return s.training.flash_attention ? AttentionMemory::flash : AttentionMemory::scores;
}

double layer_activation_bytes(const ModelSpec& s, const Layout& l, AttentionMemory a) {
  switch (s.parallel.recompute) {
    case Recompute::none: return full_layer_bytes(s, l, false, a);
    case Recompute::selective: return full_layer_bytes(s, l, true, a);
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
  double working = 0;  // full recomputation re-materialises one layer at a time
  if (s.parallel.recompute == Recompute::full) working = full_layer_bytes(s, l, false, a);
  const double logits = kLogitBytes * double(s.model.sequence) / l.cp * double(s.training.micro_batch) *
                        double(s.model.vocabulary) / l.tp;
  // ZeRO 3 gathers one layer's parameters at a time for its forward or backward.
  const double gathered = zero >= 3 ? layer_parameters(s.model) / l.tp : 0.0;
  double most = -1;
  for (int stage = 0; stage < l.pp; ++stage) {
    const double params = stage_parameters(s, l, stage);
    const double weights = (params / (zero >= 3 ? shards : 1) + gathered) * model::bytes_of(s.training.dtype);
    const double gradients = params * model::bytes_of(s.training.grad_dtype) / (zero >= 2 ? shards : 1);
    const double optimizer = params * kAdamStateBytes / (zero >= 1 ? shards : 1);
    const double chunks = chunks_in_flight(s.parallel.schedule, l.pp, l.virtual_stages, int(l.micro_batches), stage);
    const double layers_per_chunk = double(l.layers_of_stage(stage)) / l.virtual_stages;
    double activations = per_layer * layers_per_chunk * chunks + working;
    if (stage == l.pp - 1) activations += logits;
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
