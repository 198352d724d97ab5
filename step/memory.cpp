// Memory per GPU. Activations follow Korthikanti et al. 2022, Table 2 (bytes
// per layer per micro-batch, 16-bit activations, 1-byte dropout masks,
// ffn = 4h): sbh(34 + 5as/h) without parallelism, sbh(10 + 24/t + 5as/(ht))
// with tensor parallelism, sbh/t (34 + 5as/h) with sequence parallelism too.
// Its terms, tensor by tensor, follow the model's shapes (docs/step.md):
// replicated over the TP ranks R = 2sbh (each norm's input) x 2 + 2sbh (QKV's
// input) + 2sbh (the MLP's input) + sbh x 2 (GPT's two dropout masks after the
// projection and the MLP); split over them Q, K, V 2sb(a + 2kv)D, the
// projection's input 2sbaD, the MLP's 4sbf (GELU's input and output) or 6sbf
// (SwiGLU's gate, up and their product), and the scores 5as^2b (GPT: softmax
// output 2, dropout mask 1, dropout output 2) or 2as^2b (Llama, no dropout).
// Selective recomputation drops the scores term; full recomputation
// keeps only the layer input, 2sbh (2sbh/t with sequence parallelism), plus
// one layer's working set while it recomputes. The first pipeline stage holds
// the most: pp micro-batches in flight under 1F1B (times 1 + (pp-1)/(pp v)
// interleaved, section 4.2.2), all m under GPipe.
#include "step/memory.h"

#include <algorithm>

namespace coconet::step {

namespace {

constexpr double kBytesPerGB = 1e9;
constexpr double kAdamStateBytes = 12;  // fp32 master weights, first and second moments
constexpr double kLogitBytes = 4;       // fp32 logits of the cross-entropy (Korthikanti eq. for the output layer)

constexpr double kActivationBytes = 2;  // 16-bit activations
constexpr double kMaskBytes = 1;        // a dropout mask
constexpr double kGptScoreBytes = 5;    // per score: softmax output 2, dropout mask 1, dropout output 2
constexpr double kLlamaScoreBytes = 2;  // per score: softmax output (no dropout)
constexpr double kGeluMlpTensors = 2;   // GELU's input and output, f wide
constexpr double kSwigluMlpTensors = 3; // gate, up, silu(gate) x up, f wide

double full_layer_bytes(const ModelSpec& s, const Layout& l, bool drop_attention) {
  const auto& m = s.model;
  const bool gpt = m.family() == Family::gpt;
  const double sb = double(m.sequence) * double(s.training.micro_batch), e = kActivationBytes;
  const double h = double(m.hidden), ad = double(m.attention_width()), kvd = double(m.kv_width());
  const double t = l.tp;
  const double replicated = sb * h * (4 * e + (gpt ? 2 * kMaskBytes : 0.0));  // 2 norm inputs, QKV and MLP inputs
  const double mlp = (gpt ? kGeluMlpTensors : kSwigluMlpTensors) * e * sb * double(m.ffn);
  const double split = e * sb * (ad + 2 * kvd) + e * sb * ad + mlp;
  const double scores = drop_attention ? 0.0
                                       : (gpt ? kGptScoreBytes : kLlamaScoreBytes) * double(m.heads) *
                                             double(m.sequence) * sb;
  if (s.parallel.sequence_parallel) return (replicated + split + scores) / t;
  return replicated + (split + scores) / t;
}

}  // namespace

double stage_parameters(const ModelSpec& s, const Layout& l) {
  const double layers = double(s.model.layers) / l.pp;
  const double embedding = double(s.model.vocabulary) * double(s.model.hidden) / l.tp;
  // The first stage holds the embedding, the last the output layer (a copy of
  // the embedding when tied); one stage holding both holds one matrix when tied, two when not.
  const double matrices = l.pp == 1 && !s.model.tied_embeddings ? 2.0 : 1.0;
  return layers * layer_parameters(s.model) / l.tp + matrices * embedding;
}

double layer_activation_bytes(const ModelSpec& s, const Layout& l) {
  switch (s.parallel.recompute) {
    case Recompute::none: return full_layer_bytes(s, l, false);
    case Recompute::selective: return full_layer_bytes(s, l, true);
    case Recompute::full: {
      const double sbh = double(s.model.sequence) * double(s.training.micro_batch) * double(s.model.hidden);
      return 2.0 * sbh / (s.parallel.sequence_parallel ? l.tp : 1);
    }
  }
  return 0;
}

Memory memory_per_gpu(const ModelSpec& s, const Layout& l, const sim::Topology& t) {
  Memory m;
  const double params = stage_parameters(s, l);
  const double dp = l.dp;
  const int zero = s.parallel.zero;
  // ZeRO 3 gathers one layer's parameters at a time for its forward or backward.
  const double gathered = zero >= 3 ? layer_parameters(s.model) / l.tp : 0.0;
  m.weights_GB = (params / (zero >= 3 ? dp : 1) + gathered) * model::bytes_of(s.training.dtype) / kBytesPerGB;
  m.gradients_GB = params * model::bytes_of(s.training.grad_dtype) / (zero >= 2 ? dp : 1) / kBytesPerGB;
  m.optimizer_GB = params * kAdamStateBytes / (zero >= 1 ? dp : 1) / kBytesPerGB;

  const double per_layer = layer_activation_bytes(s, l);
  const double layers_per_stage = double(s.model.layers) / l.pp;
  double in_flight = 0;
  if (s.parallel.schedule == PipeSchedule::gpipe) {
    in_flight = double(l.micro_batches);
  } else {
    in_flight = double(std::min<std::int64_t>(l.pp, l.micro_batches));
    if (l.virtual_stages > 1) in_flight *= 1.0 + double(l.pp - 1) / (double(l.pp) * l.virtual_stages);
  }
  double working = 0;  // full recomputation re-materialises one layer at a time
  if (s.parallel.recompute == Recompute::full) working = full_layer_bytes(s, l, false);
  const double first = per_layer * layers_per_stage * in_flight + working;
  const double logits = kLogitBytes * double(s.model.sequence) * double(s.training.micro_batch) *
                        double(s.model.vocabulary) / l.tp;
  const double last = l.pp == 1 ? first + logits : per_layer * layers_per_stage + working + logits;
  m.activations_GB = std::max(first, last) / kBytesPerGB;
  m.capacity_GB = t.gpu.memory_GB;
  m.reserved_GB = m.capacity_GB > 0 ? t.gpu.reserved_GB.value_or(kDefaultReservedGB) : 0.0;
  return m;
}

}  // namespace coconet::step
