// This rank's values: every value of a program placed by the plan's per-rank
// views (plan/views.h) and, for the values of this rank's process group, the
// backend buffer that holds its part.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "exec/backend.h"
#include "model/program.h"
#include "plan/views.h"

namespace coconet::exec {

struct ValueInfo : plan::ValueView {
  BufferId buffer = -1;
};

class RankValues {
 public:
  // Every input and statement of `p` (which must be checked) as position
  // `position` of group `group` sees it, P ranks per group.
  RankValues(const model::Program& p, const model::Bindings& sizes, int ranks_per_group, int group, int position);

  [[nodiscard]] const ValueInfo& at(const std::string& name) const;
  [[nodiscard]] const std::map<std::string, ValueInfo>& values() const { return values_; }
  // Bytes this rank allocates for the values of its group.
  [[nodiscard]] std::int64_t bytes() const;
  // Allocates every value of this rank's group.
  void allocate(Backend& backend);
  [[nodiscard]] int ranks_per_group() const { return p_; }
  [[nodiscard]] int position() const { return position_; }

 private:
  std::map<std::string, ValueInfo> values_;
  int p_ = 1;
  int position_ = 0;
};

}  // namespace coconet::exec
