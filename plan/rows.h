// Which rows a launch covers: chunk k of a unit is the k-th of `chunks`
// pieces of a value's rows or, in slice mode, the k-th piece of every rank's
// slice; a rank touches the part of those rows it holds, as contiguous
// ranges (one backend call each). The executor cuts its calls with these, and
// lowering counts them, so the cost model charges a call's overhead as often
// as the executor makes the call.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/views.h"

namespace coconet::plan {

struct RowRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  friend bool operator==(const RowRange&, const RowRange&) = default;
};

// Global rows of chunk `chunk` of `chunks` of a value with `rows` rows: one
// range, or in slice mode the chunk-th piece of each of the `ranks` slices.
[[nodiscard]] std::vector<RowRange> chunk_rows(std::int64_t rows, int ranks, int chunks, int chunk, bool slice_mode);

// Piece `piece` of `pieces` of that chunk: each of its ranges cut alike
// (model::slice_extent), so every rank cuts the same pieces.
[[nodiscard]] std::vector<RowRange> piece_rows(std::int64_t rows, int ranks, int chunks, int chunk, int pieces,
                                               int piece, bool slice_mode);

// The part of `ranges` that value `v` holds on its rank, adjacent ranges
// merged, empty ones dropped.
[[nodiscard]] std::vector<RowRange> held_of(const std::vector<RowRange>& ranges, const ValueView& v);

// The rows of that chunk that value `v` holds on its rank, adjacent ranges
// merged, empty ones dropped.
[[nodiscard]] std::vector<RowRange> held_rows(const ValueView& v, int ranks, int chunks, int chunk, bool slice_mode);

// Block `chunk` of a tile GEMM (plan::Unit::tile): the rows of that chunk
// that `v` holds, one range per rank slice in the ring's order from the
// slice after `position`'s (its own last), empty ones dropped, none merged.
[[nodiscard]] std::vector<RowRange> tile_block_rows(const ValueView& v, int ranks, int chunks, int chunk,
                                                    bool slice_mode, int position);

}  // namespace coconet::plan
