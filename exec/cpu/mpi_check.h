// Checks every MPI call: a failure becomes an InternalError naming the host,
// the world rank, the call site and MPI's own error string (after nccl-tests'
// common.h). MPI's default handler already aborts the job on most errors.
#pragma once

#include <string>

#include <mpi.h>

#include "model/error.h"

namespace coconet::exec::cpu {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

}  // namespace coconet::exec::cpu

#define COCONET_MPI_CHECK(call)                                                       \
  do {                                                                                \
    const int coconet_mpi_rc = (call);                                                \
    if (coconet_mpi_rc != MPI_SUCCESS)                                                \
      ::coconet::exec::cpu::throw_mpi_error(coconet_mpi_rc, #call, __FILE__, __LINE__); \
  } while (0)
