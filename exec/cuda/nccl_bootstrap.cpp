// NCCL bootstrap over MPI (see nccl_bootstrap.h).
#include "exec/cuda/nccl_bootstrap.h"

#include "kernels/cuda/check.h"
#include "kernels/mpi_check.h"

namespace coconet::exec::cuda {

Bootstrap choose_bootstrap(bool launched_by_mpirun, bool mpi_initialised) {
  return launched_by_mpirun || mpi_initialised ? Bootstrap::mpi : Bootstrap::local;
}

bool mpi_initialised() {
  int initialised = 0;
  COCONET_MPI_CHECK(MPI_Initialized(&initialised));
  return initialised != 0;
}

ncclComm_t make_local_comm() {
  ncclUniqueId id{};
  COCONET_NCCL_CHECK(ncclGetUniqueId(&id));
  ncclComm_t nccl = nullptr;
  COCONET_NCCL_CHECK(ncclCommInitRank(&nccl, 1, id, 0));
  return nccl;
}

ncclUniqueId bootstrap_id(MPI_Comm comm) {
  int rank = 0;
  COCONET_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ncclUniqueId id{};
  if (rank == 0) COCONET_NCCL_CHECK(ncclGetUniqueId(&id));
  COCONET_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
  return id;
}

ncclComm_t make_nccl_comm(MPI_Comm comm) {
  int rank = 0, size = 0;
  COCONET_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  COCONET_MPI_CHECK(MPI_Comm_size(comm, &size));
  const ncclUniqueId id = bootstrap_id(comm);
  ncclComm_t nccl = nullptr;
  COCONET_NCCL_CHECK(ncclCommInitRank(&nccl, size, id, rank));
  return nccl;
}

int node_local_rank(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  COCONET_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 0;
  COCONET_MPI_CHECK(MPI_Comm_rank(node, &local));
  COCONET_MPI_CHECK(MPI_Comm_free(&node));
  return local;
}

void abort_comms(std::span<const ncclComm_t> comms) {
  for (ncclComm_t c : comms)
    if (c != nullptr) (void)ncclCommAbort(c);
}

}  // namespace coconet::exec::cuda
