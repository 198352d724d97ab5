// The transformations, one per file (split.cpp, reorder.cpp, as_slice.cpp,
// fuse.cpp, overlap.cpp, dce.cpp). Each takes a schedule by value and returns
// the transformed one, recording itself in the history. A violated
// precondition is a UserError that says what is wrong and how to fix it.
// Program-level transformations (split, reorder, as_slice) must come before
// stage-level ones (fuse, overlap).
#pragma once

#include <string>
#include <vector>

#include "model/schedule.h"

namespace coconet::model {

// split: `y = allreduce(op, x)` becomes `y.rs = reducescatter(op, x)` and
// `y = allgather(y.rs)`.
// Needs: `ar` names an allreduce; no fuse/overlap applied yet.
[[nodiscard]] Schedule split(Schedule s, const std::string& ar);

// reorder: the computations that (transitively) consume `y = allgather(x)` and
// can run on slices (element-wise statements, norms, row reductions, sends) move before it and
// run on x's slices; replicated operands are read through their slice; an
// allgather is inserted for each moved value still needed whole (an output or
// a reader that cannot run on slices). Needs: `ag` names an allgather whose
// consumers read no local operand; no fuse/overlap applied yet.
[[nodiscard]] Schedule reorder(Schedule s, const std::string& ag);

// as_slice: the shardable replicated input `state` is kept sliced for good
// (ZeRO-style): its update is computed and stored sliced and the allgather of
// its new value is dropped. Needs: `state` is a shardable replicated input,
// read only by statements that run on slices, its update's allgather feeds
// nothing but outputs; no fuse/overlap applied yet.
[[nodiscard]] Schedule as_slice(Schedule s, const std::string& state);

// fuse: stages [first, last] (containing the named statements) become one
// kernel. Legal groups: a collective (allreduce, reducescatter, send) followed
// by the computations that consume it ("fuse(AR-C)", "fuse(P2P-C)"), or a
// reducescatter, computations on its slices, and the allgather of their
// result: a fused allreduce ("fuse(RS-C-AG)"). At most one collective except
// that RS..AG pair; the stages must be consecutive and not yet overlapped.
[[nodiscard]] Schedule fuse(Schedule s, const std::string& first_stmt,
                            const std::string& last_stmt);

// overlap: consecutive stages from the one holding `first_stmt` to the one
// holding `last_stmt` run concurrently chunk by chunk: each consumes the one
// before it element-wise (a matmul and the collective on its output, a
// collective and the send after it, ...). Needs: at least one of them
// communicates, each stage after the first reads the previous one's output,
// no stage is already in an overlap group.
[[nodiscard]] Schedule overlap(Schedule s, const std::string& first_stmt,
                               const std::string& last_stmt);

// Removes statements whose values nobody reads and that are not outputs.
[[nodiscard]] Program remove_dead_code(Program p);

// Applies one recorded directive (used to replay a schedule's history).
[[nodiscard]] Schedule apply(Schedule s, const Directive& d);

}  // namespace coconet::model
