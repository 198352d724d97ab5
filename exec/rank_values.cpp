#include "exec/rank_values.h"

#include "model/error.h"

namespace coconet::exec {

RankValues::RankValues(const model::Program& p, const model::Bindings& sizes, int ranks_per_group, int group,
                       int position)
    : p_(ranks_per_group), position_(position) {
  for (auto& [name, view] : plan::rank_views(p, sizes, ranks_per_group, plan::RankId{group, position})) {
    ValueInfo v;
    static_cast<plan::ValueView&>(v) = std::move(view);
    values_.emplace(name, std::move(v));
  }
}

const ValueInfo& RankValues::at(const std::string& name) const {
  const auto it = values_.find(name);
  COCONET_ASSERT(it != values_.end(), "no value named '" + name + "' on this rank");
  return it->second;
}

std::int64_t RankValues::bytes() const {
  std::int64_t total = 0;
  for (const auto& [name, v] : values_)
    if (v.here) total += v.local_bytes();
  return total;
}

void RankValues::allocate(Backend& backend) {
  for (auto& [name, v] : values_)
    if (v.here) v.buffer = backend.allocate(v.type.dtype, v.local_numel());
}

}  // namespace coconet::exec
