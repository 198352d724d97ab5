// Defaults of a pricing context.
#include "sim/context.h"

namespace coconet::sim {

plan::BackendKind default_backend(const Topology& t) {
  return t.device == Device::cpu ? plan::BackendKind::cpu : plan::BackendKind::cuda;
}

plan::Capabilities Context::capabilities() const {
  plan::Capabilities c = plan::capabilities_of(backend.value_or(default_backend(topology)));
  c.fused_kernels = fused_kernels;
  c.tile_overlap = (c.tile_overlap && tile_here) || tile_designs;
  c.tile_fused = c.tile_fused || tile_designs;  // a fused op's program per block: priced as designed, not built on cuda
  return c;
}

}  // namespace coconet::sim
