// NCCL communicators bootstrapped over MPI: rank 0 of an MPI communicator
// makes the unique id (ncclGetUniqueId), MPI_Bcast hands it to the others,
// every rank joins (ncclCommInitRank). The same binary thus runs on one node
// or many under mpirun. A single process not started by mpirun needs no MPI
// at all: its one-rank communicator comes from a unique id made locally, so
// the cuda backend runs on a machine whose MPI cannot start (or is absent).
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <span>

namespace coconet::exec::cuda {

// How this process's communicators are made.
enum class Bootstrap {
  local,  // one rank, no MPI: ncclCommInitRank(nranks 1) from a local unique id
  mpi,    // every rank of MPI_COMM_WORLD, the id broadcast over MPI
};

// `local` for a single process that mpirun did not start and that has not
// initialised MPI itself; `mpi` otherwise (mpirun -np 1 included).
[[nodiscard]] Bootstrap choose_bootstrap(bool launched_by_mpirun, bool mpi_initialised);

// MPI_Initialized (legal before MPI_Init; starts nothing).
[[nodiscard]] bool mpi_initialised();

// A one-rank NCCL communicator on the current device, no MPI involved.
[[nodiscard]] ncclComm_t make_local_comm();

// The id rank 0 of `comm` made, on every rank of `comm` (collective).
[[nodiscard]] ncclUniqueId bootstrap_id(MPI_Comm comm);

// A NCCL communicator over the ranks of `comm`, same ranks and order (collective).
[[nodiscard]] ncclComm_t make_nccl_comm(MPI_Comm comm);

// The local rank of this process among the ranks on its node (picks the GPU).
[[nodiscard]] int node_local_rank(MPI_Comm comm);

// Aborts every non-null communicator (errors ignored: this is the way out).
void abort_comms(std::span<const ncclComm_t> comms);

}  // namespace coconet::exec::cuda
