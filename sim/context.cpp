// Defaults of a pricing context.
#include "sim/context.h"

#include <algorithm>

namespace coconet::sim {

plan::BackendKind default_backend(const Topology& t) {
  return t.device == Device::cpu ? plan::BackendKind::cpu : plan::BackendKind::cuda;
}

plan::Capabilities Context::capabilities() const {
  return plan::capabilities_of(backend.value_or(default_backend(topology)));
}

int default_group_size(const Topology& t, const model::Program& p) {
  return std::max(1, t.total_gpus() / std::max(1, p.groups()));
}

}  // namespace coconet::sim
