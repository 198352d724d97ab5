// This rank's values: every value of a program placed by the plan's per-rank
// views (plan/views.h) and, for the values of this rank's process group, the
// backend buffer that holds its part: its own, or, for an update written in
// place (exec/update_in_place.h), a view of the state tensor's buffer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "exec/backend.h"
#include "exec/update_in_place.h"
#include "model/program.h"
#include "plan/views.h"

namespace coconet::exec {

struct ValueInfo : plan::ValueView {
  BufferId buffer = -1;
  bool allocated = false;  // false: lives only in a fused op's scratch
  std::optional<InPlace> in_place;  // held in an input's buffer (exec/update_in_place.h)
};

class RankValues {
 public:
  // Every input and statement of `p` (which must be checked) as position
  // `position` of group `group` sees it, P ranks per group. Values named in
  // `unallocated` (a fused op's scratch, plan/fused_form.h) get no buffer.
  // `in_place`: updates are written over the state they update where
  // update_in_place.h allows (the backend aliases buffers:
  // Backend::updates_in_place).
  RankValues(const model::Program& p, const model::Bindings& sizes, int ranks_per_group, int group, int position,
             const std::set<std::string>& unallocated = {}, bool in_place = false);

  [[nodiscard]] const ValueInfo& at(const std::string& name) const;
  [[nodiscard]] const std::map<std::string, ValueInfo>& values() const { return values_; }
  // Bytes this rank allocates for the values of its group (none for the
  // values written in place).
  [[nodiscard]] std::int64_t bytes() const;
  // The values written in place, by name (the same on every rank of a group).
  [[nodiscard]] const std::map<std::string, InPlace>& in_place() const { return in_place_; }
  // The inputs a step overwrites with their updates (to be refilled before the next).
  [[nodiscard]] std::set<std::string> overwritten_inputs() const;
  // Allocates every value of this rank's group (the inputs uncleared:
  // Backend::allocate_to_fill).
  void allocate(Backend& backend);
  [[nodiscard]] int ranks_per_group() const { return p_; }
  [[nodiscard]] int position() const { return position_; }

 private:
  std::map<std::string, ValueInfo> values_;
  std::map<std::string, InPlace> in_place_;
  std::set<std::string> inputs_;  // the program's inputs (filled whole, Executor::fill_inputs)
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
[[nodiscard]] model::Access access_for(const ValueInfo& t, const ValueInfo& out, std::int64_t row0);

// A value of rank >= 3 seen as [dimension 0 x the middle dimensions, last
// dimension] rows: what an element-wise call over rows [row0, ...) of `out`
// (global rows of dimension 0) works on when an operand repeats along the
// last dimension (a rowmax's [A, S, 1] on [A, S, S]); inner_rows() is the
// folded rows per row of dimension 0.
[[nodiscard]] std::int64_t inner_rows(const ValueInfo& out);
// How element (i, j) of such a folded block reads operand `t`; UserError for
// a broadcast the executor cannot address (along dimension 0 or a middle one).
[[nodiscard]] model::Access folded_access(const ValueInfo& t, const ValueInfo& out, std::int64_t row0);

}  // namespace coconet::exec
