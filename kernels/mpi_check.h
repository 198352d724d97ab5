// COCONET_MPI_CHECK, the one check of MPI calls, for every backend (the cpu
// backend's collectives, the cuda backend's NCCL bootstrap): a failure throws
// DeviceError naming the host, the rank, the call site and MPI's own error
// string (kernels/check.h). MPI's default handler already aborts the job on
// most errors; this catches the ones it returns.
#pragma once

#include "kernels/check.h"

namespace coconet::kernels {

// Throws DeviceError when `status` is not MPI_SUCCESS.
void check_mpi(int status, const CallSite& site);

}  // namespace coconet::kernels

#define COCONET_MPI_CHECK(call) \
  ::coconet::kernels::check_mpi(static_cast<int>(call), COCONET_CALL_SITE(call))
