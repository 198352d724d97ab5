// Row ranges of chunks, ragged slices included (model::slice_extent).
#include "plan/rows.h"

#include <algorithm>

namespace coconet::plan {

std::vector<RowRange> chunk_rows(std::int64_t rows, int ranks, int chunks, int chunk, bool slice_mode) {
  if (!slice_mode) {
    const auto e = model::slice_extent(rows, chunks, chunk);
    return {{e.begin, e.begin + e.size}};
  }
  std::vector<RowRange> out;
  for (int r = 0; r < ranks; ++r) {
    const auto slice = model::slice_extent(rows, ranks, r);
    const auto piece = model::slice_extent(slice.size, chunks, chunk);
    out.push_back({slice.begin + piece.begin, slice.begin + piece.begin + piece.size});
  }
  return out;
}

std::vector<RowRange> piece_rows(std::int64_t rows, int ranks, int chunks, int chunk, int pieces, int piece,
                                 bool slice_mode) {
  auto out = chunk_rows(rows, ranks, chunks, chunk, slice_mode);
  for (auto& r : out) {
    const auto e = model::slice_extent(r.end - r.begin, pieces, piece);
    r = {r.begin + e.begin, r.begin + e.begin + e.size};
  }
  return out;
}

std::vector<RowRange> held_of(const std::vector<RowRange>& ranges, const ValueView& v) {
  std::vector<RowRange> merged;
  for (const auto& r : ranges) {
    if (r.end <= r.begin) continue;
    if (!merged.empty() && merged.back().end == r.begin) merged.back().end = r.end;
    else merged.push_back(r);
  }
  std::vector<RowRange> out;
  for (const auto& r : merged) {
    const RowRange held{std::max(r.begin, v.row_begin), std::min(r.end, v.row_begin + v.local_rows)};
    if (held.end > held.begin) out.push_back(held);
  }
  return out;
}

std::vector<RowRange> held_rows(const ValueView& v, int ranks, int chunks, int chunk, bool slice_mode) {
  return held_of(chunk_rows(v.rows, ranks, chunks, chunk, slice_mode), v);
}

std::vector<RowRange> tile_block_rows(const ValueView& v, int ranks, int chunks, int chunk, bool slice_mode,
                                      int position) {
  std::vector<RowRange> slices = chunk_rows(v.rows, ranks, chunks, chunk, slice_mode);
  if (slice_mode) std::rotate(slices.begin(), slices.begin() + (position + 1) % std::ssize(slices), slices.end());
  std::vector<RowRange> out;
  for (const RowRange& r : slices)
    for (const RowRange& held : held_of({r}, v)) out.push_back(held);
  return out;
}

}  // namespace coconet::plan
