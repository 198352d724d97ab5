// NCCL communicators bootstrapped over MPI: rank 0 of an MPI communicator
// makes the unique id (ncclGetUniqueId), MPI_Bcast hands it to the others,
// every rank joins (ncclCommInitRank). The same binary thus runs on one node
// or many under mpirun.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <span>

namespace coconet::exec::cuda {

// The id rank 0 of `comm` made, on every rank of `comm` (collective).
[[nodiscard]] ncclUniqueId bootstrap_id(MPI_Comm comm);

// A NCCL communicator over the ranks of `comm`, same ranks and order (collective).
[[nodiscard]] ncclComm_t make_nccl_comm(MPI_Comm comm);

// The local rank of this process among the ranks on its node (picks the GPU).
[[nodiscard]] int node_local_rank(MPI_Comm comm);

// Aborts every non-null communicator (errors ignored: this is the way out).
void abort_comms(std::span<const ncclComm_t> comms);

}  // namespace coconet::exec::cuda
