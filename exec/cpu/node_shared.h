// Host regions the ranks of one node share, for the cpu backend's
// Backend::share_on_node: one POSIX shared-memory object (tmpfs, /dev/shm)
// per key, created and filled by the lowest node rank that asks for it and
// mapped by the others, unlinked once every one has it mapped (its memory goes
// with the last mapping). The runtime's reference outputs of a replicated
// tensor are the same on every rank: held once per host rather than once per
// rank (BERT-large Adam's w1, m1 and v1, 4 GB, on 2 ranks of one machine).
// A rank alone with its key, or any failure to create the object (no
// /dev/shm, not room enough in it: posix_fallocate), gives every rank of the
// call a region of its own (a HostBlock), as before.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>

#include "exec/backend.h"

namespace coconet::exec::cpu {

// Collective over `node` (its ranks call it in the same order); `serial`
// numbers the calls, the same on every rank, and names the objects apart.
[[nodiscard]] NodeShared share_on_node(MPI_Comm node, std::span<const std::int64_t> key,
                                       std::int64_t bytes, std::int64_t serial);

}  // namespace coconet::exec::cpu
