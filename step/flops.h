// FLOP counts of a training step, each under a named convention: the model's
// FLOPs (no recomputation, what MFU counts), the hardware's (with the
// recomputation the layout runs), Megatron-LM's SC'21 eq. 3 (which counts
// full recomputation whatever the layout runs), and NVIDIA dgxc-benchmarking's
// stated Llama and GPT-3/Nemotron formulas. Every count: 2 FLOPs per multiply-add, GEMMs only
// (element-wise work not counted), attention non-causal (the s x s scores
// counted whole, as Megatron-LM and NVIDIA count them).
#pragma once

#include "step/spec.h"

namespace coconet::step {

// One layer's forward FLOPs per token: 2 (h (a + 2 kv) D + a D h + m h f)
// (m = 2 for gelu and squared_relu, 3 for swiglu)
// for the GEMMs with weights, 4 s a D for the scores and the context. With
// multi-head latent attention the attention's GEMMs are its down- and
// up-projections and projection (Transformer::attention_weights) and the
// scores and context 2 s a (D + v_head_dim), D = nope + rope.
[[nodiscard]] double layer_forward_flops_per_token(const Transformer& m);
// A layer with experts (the moe section): the attention as above, the router
// h x experts, and each token's top_k routed and every shared expert, 3 h
// expert_ffn each (Megatron-LM's num_floating_point_operations counts MoE
// layers so: the active experts, not the padded slots).
[[nodiscard]] double moe_layer_forward_flops_per_token(const ModelSpec& s);
// Its MLP's alone: the router and each token's top_k and shared experts.
[[nodiscard]] double moe_mlp_forward_flops_per_token(const ModelSpec& s);

// The step's FLOPs without recomputation: 3 passes (forward, dgrad, wgrad) of
// every layer and of the logits GEMM, B s (3 l F_layer + 6 h V). For GPT
// (a D = h, kv = a, f = 4h, gelu) 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
[[nodiscard]] double model_flops(const ModelSpec& s);

// What the GPUs run: model_flops plus the recomputation (full: every layer's
// forward again, B s l F_layer; selective: the attention core's scores and
// context again, 4 B s^2 l a D).
[[nodiscard]] double hardware_flops(const ModelSpec& s);

// Megatron-LM's count (Narayanan et al., SC'21, eq. 3):
// 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)): a GPT layer with full
// recomputation, whatever the layout recomputes. Its own figure, for comparing
// with SC'21's tables.
[[nodiscard]] double megatron_eq3_flops(const ModelSpec& s);

// NVIDIA dgxc-benchmarking's Llama formula (README at commit
// 35a9aecc8d5b17d99d80f52f38c75ade0dbab7ae), FLOPs per sequence:
// s (12 L h^2 (1 + G/A + s/h) + 18 L F h + 6 V h), G the K/V heads (query
// groups), A the heads; non-causal attention.
[[nodiscard]] double dgxc_llama_flops_per_sequence(double s, double L, double h, double A, double G,
                                                   double F, double V);

// NVIDIA dgxc-benchmarking's GPT-3 and Nemotron formula (README at commit
// 35a9aecc8d5b17d99d80f52f38c75ade0dbab7ae), FLOPs per sequence:
// s (24 L h^2 + 12 L h s + 48 L h^2 + 6 V h): the attention's Q, K, V and
// projection h x h each (multi-head attention), the scores and context
// non-causal, a 4h MLP of two matrices, the logits. For a model with
// grouped-query attention (Nemotron-4: 8 K/V heads of 96) it counts K and V
// as wide as Q, more than the model's GEMMs (docs/step.md).
[[nodiscard]] double dgxc_gpt_flops_per_sequence(double s, double L, double h, double V);

}  // namespace coconet::step
