// Per-rank views: where every value of a program lives on one rank (a
// position in a process group), its global and local shapes seen as 2-D
// [rows, cols] (dimension 0 by the product of the rest; a 1-D tensor is
// [n, 1], a scalar [1, 1]), and which rows and columns of the global tensor
// the rank holds (ragged slices included: the first n % P ranks hold one
// more). The executor allocates these; the cost model sizes work by rank 0's,
// which holds the largest slice.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/program.h"

namespace coconet::plan {

struct ValueView {
  std::string name;
  model::TensorType type;
  std::vector<std::int64_t> global_dims;
  std::vector<std::int64_t> local_dims;
  std::int64_t rows = 1, cols = 1;              // global, as 2-D
  std::int64_t local_rows = 1, local_cols = 1;  // this rank's part
  std::int64_t row_begin = 0, col_begin = 0;    // where the part starts in the global tensor
  bool here = false;                            // lives in this rank's process group

  [[nodiscard]] std::int64_t local_numel() const { return local_rows * local_cols; }
  [[nodiscard]] std::int64_t local_bytes() const { return local_numel() * model::bytes_of(type.dtype); }
  [[nodiscard]] int rank() const { return static_cast<int>(global_dims.size()); }
  friend bool operator==(const ValueView&, const ValueView&) = default;
};

// Which rank: position `position` (0..P-1) of process group `group`.
struct RankId {
  int group = 0;
  int position = 0;
};

// Every input and statement of a checked program as rank `who` sees it, P
// ranks per group. Throws UserError for a slicing the runtime cannot hold
// (sliced along a dimension other than 0, or 1 of a 2-D tensor).
[[nodiscard]] std::map<std::string, ValueView> rank_views(const model::Program& p, const model::Bindings& sizes,
                                                          int ranks_per_group, RankId who);

}  // namespace coconet::plan
