// The blocks an alltoall moves: a value seen as 2-D [rows, cols]
// (plan/views.h) held by each position of a group as a rectangle (all of it,
// a slice of its rows, or of a 2-D tensor's columns); what position q sends
// position r is the part of q's rectangle of the input that lies in r's
// rectangle of the output, addressed in q's input buffer, and r receives it
// into its output buffer. Backend::alltoall takes these.
#pragma once

#include <vector>

#include "exec/backend.h"
#include "exec/rank_values.h"

namespace coconet::exec {

struct AlltoallBlocks {
  std::vector<Block2d> send;  // [r]: to position r, in x's buffer
  std::vector<Block2d> recv;  // [r]: from position r, in y's buffer
};

// The blocks of `y = alltoall(x, d)` on this rank (`position` of `p`).
[[nodiscard]] AlltoallBlocks alltoall_blocks(const ValueInfo& x, const ValueInfo& y, int p, int position);

}  // namespace coconet::exec
