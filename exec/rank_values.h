// This rank's values: every value of a program placed by the plan's per-rank
// views (plan/views.h) and, for the values of this rank's process group, the
// backend buffer that holds its part.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "exec/backend.h"
#include "model/program.h"
#include "plan/views.h"

namespace coconet::exec {

struct ValueInfo : plan::ValueView {
  BufferId buffer = -1;
  bool allocated = false;  // false: lives only in a fused op's scratch
};

class RankValues {
 public:
  // Every input and statement of `p` (which must be checked) as position
  // `position` of group `group` sees it, P ranks per group. Values named in
  // `unallocated` (a fused op's scratch, plan/fused_form.h) get no buffer.
  RankValues(const model::Program& p, const model::Bindings& sizes, int ranks_per_group, int group, int position,
             const std::set<std::string>& unallocated = {});

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

// Rows [begin, end) of `v` (global row numbers) as a view of its buffer.
[[nodiscard]] View rows_view(const ValueInfo& v, std::int64_t begin, std::int64_t end);
// All of this rank's part of `v`.
[[nodiscard]] View whole(const ValueInfo& v);
// How element (i, j) of a block of `out` starting at global row `row0` reads
// operand `t` (broadcasts included); UserError for a broadcast the executor
// cannot address.
[[nodiscard]] kernels::Access access_for(const ValueInfo& t, const ValueInfo& out, std::int64_t row0);

}  // namespace coconet::exec
