// The cpu backend's reduce-scatter: a ring over MPI point-to-point messages,
// reduced with MPI_Reduce_local (the backend's own f16/bf16 operators,
// exec/cpu/reduce_ops.h, or MPI's built-in f32 ones).
//
// Why not MPI_Ireduce_scatter: Open MPI 4.1's non-blocking reduce-scatter
// (coll/libnbc, nbc_ireduce_scatter.c) reduces the whole input on rank 0
// (binomial tree) and scatters the parts from there, in a temporary buffer of
// twice the input that it mallocs per call. glibc maps an allocation that
// large afresh each time, so every call pays a page fault per 4 KiB of it
// (about 3.3 ms per MiB on the 2-core VM this was measured on: a fresh 32 MiB
// touched in 107 ms, a warm one in 2.3 ms), and rank 0 reduces all P parts,
// not one: 145 ms for 2^24 f16 elements on 2 ranks where an out-of-place
// MPI_Iallreduce (same library, no temporary on 2 ranks) takes 15 ms; in place
// that allreduce copies its input into such a temporary and costs 157 ms. The
// allreduce the executor calls is out of place. The ring moves and
// reduces (P-1)/P of the input on every rank, in place in the result or in
// scratch the backend takes from its pool (exec/cpu/host_pool.h) and keeps
// until the plan releases its buffers.
//
// Step s (0 <= s < P-1) of position r: send part (r-s-1) mod P (at step 0 my
// own input, later the partial sum received the step before) to r+1, receive
// part (r-s-2) mod P from r-1 and add my input of it. The last step receives
// part r: the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <mpi.h>

namespace coconet::exec::cpu {

struct RingReduceScatter {
  std::vector<const std::byte*> parts;  // my input of each position's part
  std::vector<int> counts;              // each part's elements (the same on every rank)
  std::byte* out = nullptr;             // my part's reduction; may be parts[position] itself
  std::size_t width = 0;                // bytes per element
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;  // commutative
  MPI_Comm comm = MPI_COMM_NULL;  // rank r of it is position r
  int position = 0;
  int tag = 0;
};

// Completes one request (the backend's wait_politely).
using WaitRequest = std::function<void(MPI_Request&)>;

// The scratch bytes ring_reduce_scatter needs for `call`: none on 2 ranks
// when `out` overlaps no part, the largest part on 2 ranks otherwise, two
// of it (partial sums in flight and arriving) from 3 ranks on.
[[nodiscard]] std::size_t ring_scratch_bytes(const RingReduceScatter& call);

// Runs the ring in `scratch` (ring_scratch_bytes(call) bytes at least).
void ring_reduce_scatter(const RingReduceScatter& call, std::span<std::byte> scratch, const WaitRequest& wait);

}  // namespace coconet::exec::cpu
