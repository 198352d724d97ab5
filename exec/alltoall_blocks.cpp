// Alltoall blocks from the values' layouts (see alltoall_blocks.h).
#include "exec/alltoall_blocks.h"

#include <algorithm>

#include "model/error.h"

namespace coconet::exec {
namespace {

struct Rect {
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
};

// The rectangle of `v` (global [rows, cols]) that position q holds.
Rect held_by(const ValueInfo& v, int p, int q) {
  Rect r{0, v.rows, 0, v.cols};
  const auto& l = v.type.layout;
  if (!l.is_sliced()) return r;
  if (l.dim == 0) {
    const auto e = model::slice_extent(v.rows, p, q);
    r.row0 = e.begin;
    r.rows = e.size;
  } else {
    COCONET_ASSERT(l.dim == 1 && v.rank() == 2, "alltoall: a slicing the runtime does not hold");
    const auto e = model::slice_extent(v.cols, p, q);
    r.col0 = e.begin;
    r.cols = e.size;
  }
  return r;
}

Rect intersect(const Rect& a, const Rect& b) {
  const std::int64_t r0 = std::max(a.row0, b.row0);
  const std::int64_t c0 = std::max(a.col0, b.col0);
  const std::int64_t r1 = std::min(a.row0 + a.rows, b.row0 + b.rows);
  const std::int64_t c1 = std::min(a.col0 + a.cols, b.col0 + b.cols);
  return {r0, std::max<std::int64_t>(0, r1 - r0), c0, std::max<std::int64_t>(0, c1 - c0)};
}

// `part` (global coordinates, inside `mine`) as a block of the buffer holding `mine`.
Block2d block_of(const ValueInfo& v, const Rect& mine, const Rect& part) {
  Block2d b;
  b.buffer = v.buffer;
  b.rows = part.rows;
  b.cols = part.cols;
  b.stride = mine.cols;
  b.offset = part.rows > 0 && part.cols > 0 ? (part.row0 - mine.row0) * mine.cols + (part.col0 - mine.col0) : 0;
  return b;
}

}  // namespace

AlltoallBlocks alltoall_blocks(const ValueInfo& x, const ValueInfo& y, int p, int position) {
  COCONET_ASSERT(x.rows == y.rows && x.cols == y.cols, "alltoall: input and output differ in shape");
  AlltoallBlocks out;
  const Rect x_mine = held_by(x, p, position);
  const Rect y_mine = held_by(y, p, position);
  for (int r = 0; r < p; ++r) {
    out.send.push_back(block_of(x, x_mine, intersect(x_mine, held_by(y, p, r))));
    out.recv.push_back(block_of(y, y_mine, intersect(held_by(x, p, r), y_mine)));
  }
  return out;
}

}  // namespace coconet::exec
