// Memory per GPU of a training step: weights, gradients and Adam's state by
// ZeRO stage (Rajbhandari et al., SC'20: 2 + 2 + 12 bytes per parameter in
// mixed precision), and activations by recomputation and sequence parallelism
// (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
// Models", 2022, Table 2 and section 4.2.2, generalised to GQA, SwiGLU and a
// head_dim of its own: docs/step.md), checked against the GPU's HBM less
// what the process cannot use (gpu.reserved_GB).
#pragma once

#include <algorithm>

#include "sim/topology.h"
#include "step/spec.h"

namespace coconet::step {

// HBM a training process cannot hold its tensors in, when the topology does
// not say (gpu.reserved_GB): an estimate from three published figures, not a
// measurement of ours: the CUDA context with PyTorch's and cuBLAS's kernels,
// about 1 GB (781 MB by nvidia-smi at the first CUDA call, pytorch/pytorch
// issue #34323; "~1GB" per process, skrl's documentation citing pytorch issue
// #12873); NCCL's buffers, NCCL_BUFFSIZE 4 MiB per channel and peer (NCCL's
// environment-variable documentation) over the TP, DP and pipeline
// communicators' channels, about 1 GB; the caching allocator's fragmentation
// and workspaces, about 1 GB.
inline constexpr double kDefaultReservedGB = 3.0;

struct Memory {
  double weights_GB = 0;
  double gradients_GB = 0;
  double optimizer_GB = 0;
  double activations_GB = 0;
  double capacity_GB = 0;  // the GPU's HBM (0: the topology does not say)
  double reserved_GB = 0;  // of it, what the process cannot use for tensors (gpu.reserved_GB or the default)

  [[nodiscard]] double total_GB() const { return weights_GB + gradients_GB + optimizer_GB + activations_GB; }
  [[nodiscard]] double usable_GB() const { return capacity_GB - reserved_GB; }
  [[nodiscard]] bool fits() const { return capacity_GB <= 0 || total_GB() <= usable_GB(); }
};

// Parameters held by one GPU of pipeline stage `stage` before ZeRO sharding,
// those every data-parallel rank holds alike: its layers (layout.chunk_layers)
// over tp (an MoE layer's attention, norms, router and shared experts), and the
// embedding (first stage) or the output layer (last stage).
[[nodiscard]] double stage_parameters(const ModelSpec& s, const Layout& l, int stage);
// The most any stage holds (what the data-parallel reduction and memory are sized by).
[[nodiscard]] double stage_parameters(const ModelSpec& s, const Layout& l);
// The routed experts' parameters one GPU of `stage` holds: its MoE layers'
// experts over ep x etp (reduced, and sharded by ZeRO, over the expert
// data-parallel ranks); 0 for a dense model. The second: at the stage
// stage_parameters(s, l) names.
[[nodiscard]] double stage_expert_parameters(const ModelSpec& s, const Layout& l, int stage);
[[nodiscard]] double stage_expert_parameters(const ModelSpec& s, const Layout& l);
// The stage that holds the most parameters, dense and experts' (the first
// of equal ones): the stage the two above without a stage name.
[[nodiscard]] int largest_stage(const ModelSpec& s, const Layout& l);

// One GPU's parameters of each kind of layer on `stage`, before ZeRO
// sharding, as ZeRO 3 gathers and reduce-scatters them a layer at a time: a
// dense layer over tp, a layer with experts its dense part (attention,
// norms, router, shared experts) over tp and its routed experts over ep x
// etp; and how many of each the stage holds.
struct LayerShards {
  double dense_layer = 0;
  double moe_layer = 0;
  double experts = 0;
  double dense_layers = 0;
  double moe_layers = 0;
  // The most one layer gathers (the buffer ZeRO 3 holds while it computes).
  [[nodiscard]] double largest() const {
    return std::max(dense_layers > 0 ? dense_layer : 0.0, moe_layers > 0 ? moe_layer + experts : 0.0);
  }
};
[[nodiscard]] LayerShards layer_shards(const ModelSpec& s, const Layout& l, int stage);

// How the attention core keeps what its backward needs: the s x s scores
// materialised (softmax output, and GPT's dropout mask and output), or flash
// attention (Dao et al. 2022), which keeps per query and head only the
// softmax's log-sum-exp in fp32 (FlashAttention-2, Dao 2023, section 3.1.1)
// and recomputes the scores in its backward.
enum class AttentionMemory { scores, flash };

// The form the tuner picks where the model allows it (training.attention):
// flash, which also keeps the least; so sizing a layout with it before the
// tuner has chosen never drops one that would fit.
[[nodiscard]] AttentionMemory allowed_attention_memory(const ModelSpec& s);

// Activation bytes one layer keeps for one micro-batch on one GPU (Korthikanti
// Table 2), its tokens divided by cp under context parallelism.
// An MoE layer (`moe`) keeps its experts' tensors in place of the dense MLP's.
[[nodiscard]] double layer_activation_bytes(const ModelSpec& s, const Layout& l, AttentionMemory a, bool moe = false);

[[nodiscard]] Memory memory_per_gpu(const ModelSpec& s, const Layout& l, const sim::Topology& t, AttentionMemory a);
// With the attention the model allows (allowed_attention_memory): the search's
// check before pricing.
[[nodiscard]] Memory memory_per_gpu(const ModelSpec& s, const Layout& l, const sim::Topology& t);

}  // namespace coconet::step
