// FLOP counts (see flops.h).
#include "step/flops.h"

namespace coconet::step {

namespace {

constexpr double kFlopsPerMac = 2;
constexpr double kPasses = 3;  // forward, dgrad, wgrad: a backward is twice a forward's GEMMs

double tokens(const ModelSpec& s) {
  return double(s.training.global_batch) * double(s.model.sequence);
}

// Scores Q K^T and context P V, forward, per token: 2 s a D each (MLA: the
// scores at D = nope + rope, the context at v_head_dim).
double attention_core_flops_per_token(const Transformer& m) {
  return kFlopsPerMac * double(m.sequence) * double(m.score_context_width());
}

}  // namespace

double layer_forward_flops_per_token(const Transformer& m) {
  const double h = double(m.hidden), f = double(m.ffn);
  const double weights = m.attention_weights() + double(m.ffn_matrices()) * h * f;
  return kFlopsPerMac * weights + attention_core_flops_per_token(m);
}

double moe_mlp_forward_flops_per_token(const ModelSpec& s) {
  const auto& m = s.model;
  const double h = double(m.hidden);
  const double router = h * double(s.moe.experts);
  const double experts = double(s.moe.top_k + s.moe.shared_experts) * double(m.ffn_matrices()) * h *
                         double(s.moe.expert_ffn);
  return kFlopsPerMac * (router + experts);
}

double moe_layer_forward_flops_per_token(const ModelSpec& s) {
  const auto& m = s.model;
  return kFlopsPerMac * m.attention_weights() + moe_mlp_forward_flops_per_token(s) +
         attention_core_flops_per_token(m);
}

namespace {
// Every layer's forward FLOPs per token, dense and with experts.
double layers_forward_flops_per_token(const ModelSpec& s) {
  const double moe = double(moe_layers(s));
  return (double(s.model.layers) - moe) * layer_forward_flops_per_token(s.model) +
         (moe > 0 ? moe * moe_layer_forward_flops_per_token(s) : 0.0);
}

// A multi-token prediction layer's forward per token (spec.h
// Transformer::mtp_layers): like the model's last layer, with experts when
// the model has them.
double mtp_layer_forward_flops_per_token(const ModelSpec& s) {
  return s.moe.on() ? moe_layer_forward_flops_per_token(s) : layer_forward_flops_per_token(s.model);
}

// The multi-token prediction modules' forward GEMMs per token: each depth its
// layer, the projection 2h x h and a pass of the output layer.
double mtp_forward_flops_per_token(const ModelSpec& s, double logits) {
  const double h = double(s.model.hidden);
  return double(s.model.mtp_layers) * (mtp_layer_forward_flops_per_token(s) + kFlopsPerMac * 2 * h * h + logits);
}
}  // namespace

double model_flops(const ModelSpec& s) {
  const auto& m = s.model;
  const double logits = kFlopsPerMac * double(m.hidden) * double(m.vocabulary);
  return tokens(s) * kPasses * (layers_forward_flops_per_token(s) + logits + mtp_forward_flops_per_token(s, logits));
}

double hardware_flops(const ModelSpec& s) {
  const auto& m = s.model;
  double again = 0;  // per token per layer
  switch (s.parallel.recompute) {
    case Recompute::none:
      break;
    case Recompute::selective:
      again = attention_core_flops_per_token(m);
      break;
    case Recompute::mla_up_proj:
      again = kFlopsPerMac * m.up_projection_weights();
      break;
    case Recompute::moe:  // the MoE layers' MLPs (and the MTP layers', which have experts with the model)
      return model_flops(s) + tokens(s) * double(moe_layers(s) + m.mtp_layers) * moe_mlp_forward_flops_per_token(s);
    case Recompute::full:  // the multi-token prediction layers recompute as the model's do
      return model_flops(s) + tokens(s) * (layers_forward_flops_per_token(s) +
                                           double(m.mtp_layers) * mtp_layer_forward_flops_per_token(s));
  }
  return model_flops(s) + tokens(s) * double(m.layers + m.mtp_layers) * again;
}

double megatron_eq3_flops(const ModelSpec& s) {
  const double B = double(s.training.global_batch), sq = double(s.model.sequence),
               l = double(s.model.layers), h = double(s.model.hidden),
               V = double(s.model.vocabulary);
  return 96.0 * B * sq * l * h * h * (1.0 + sq / (6.0 * h) + V / (16.0 * l * h));
}

double dgxc_llama_flops_per_sequence(double s, double L, double h, double A, double G, double F,
                                     double V) {
  return s * (12 * L * h * h * (1 + G / A + s / h) + 18 * L * F * h + 6 * V * h);
}

double dgxc_gpt_flops_per_sequence(double s, double L, double h, double V) {
  return s * (24 * L * h * h + 12 * L * h * s + 48 * L * h * h + 6 * V * h);
}

}  // namespace coconet::step
