// Memory per GPU of a training step: weights, gradients and Adam's state by
// ZeRO stage (Rajbhandari et al., SC'20: 2 + 2 + 12 bytes per parameter in
// mixed precision), and activations by recomputation and sequence parallelism
// (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
// Models", 2022, Table 2 and section 4.2.2), checked against the GPU's HBM.
#pragma once

#include "sim/topology.h"
#include "step/spec.h"

namespace coconet::step {

struct Memory {
  double weights_GB = 0;
  double gradients_GB = 0;
  double optimizer_GB = 0;
  double activations_GB = 0;
  double capacity_GB = 0;  // the GPU's HBM (0: the topology does not say)

  [[nodiscard]] double total_GB() const { return weights_GB + gradients_GB + optimizer_GB + activations_GB; }
  [[nodiscard]] bool fits() const { return capacity_GB <= 0 || total_GB() <= capacity_GB; }
};

// Parameters held by one GPU before ZeRO sharding: its pipeline stage's layers
// over tp, and the embedding (first stage) or the output layer (last stage).
[[nodiscard]] double stage_parameters(const ModelSpec& s, const Layout& l);

// Activation bytes one layer keeps for one micro-batch on one GPU (Korthikanti Table 2).
[[nodiscard]] double layer_activation_bytes(const ModelSpec& s, const Layout& l);

[[nodiscard]] Memory memory_per_gpu(const ModelSpec& s, const Layout& l, const sim::Topology& t);

}  // namespace coconet::step
