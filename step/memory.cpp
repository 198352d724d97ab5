// Memory per GPU. Activations follow Korthikanti et al. 2022, Table 2 (bytes
// per layer per micro-batch, 16-bit activations, 1-byte dropout masks,
// ffn = 4h): sbh(34 + 5as/h) without parallelism, sbh(10 + 24/t + 5as/(ht))
// with tensor parallelism, sbh/t (34 + 5as/h) with sequence parallelism too;
// selective recomputation drops the 5as/h attention term; full recomputation
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

double full_layer_bytes(const ModelSpec& s, const Layout& l, bool drop_attention) {
  const double sbh = double(s.model.sequence) * double(s.training.micro_batch) * double(s.model.hidden);
  const double t = l.tp;
  const double attn = drop_attention ? 0.0 : 5.0 * double(s.model.heads) * double(s.model.sequence) /
                                                 double(s.model.hidden);
  if (s.parallel.sequence_parallel) return sbh / t * (34.0 + attn);
  return sbh * (10.0 + 24.0 / t + attn / t);
}

}  // namespace

double stage_parameters(const ModelSpec& s, const Layout& l) {
  const double layers = double(s.model.layers) / l.pp;
  const double embedding = double(s.model.vocabulary) * double(s.model.hidden) / l.tp;
  return layers * layer_parameters(s.model) / l.tp + embedding;
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
  return m;
}

}  // namespace coconet::step
