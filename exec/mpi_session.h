// MPI for the backends that need it (cpu, and cuda for its NCCL bootstrap):
// initialised once per process with MPI_THREAD_MULTIPLE (the cpu backend's
// communication runs on its own thread), finalised at process exit. A build
// without MPI (mpi_session_none.cpp) has the same functions: ensure_mpi says
// MPI is missing, finalize_mpi does nothing.
#pragma once

#include <string>

namespace coconet::exec {

// Initialises MPI on first call (idempotent); throws UserError when MPI cannot
// give full thread support.
void ensure_mpi();

// Finalises MPI now if this process initialised it (later calls do nothing).
void finalize_mpi();

// The MPI library this process runs with, its name and version as the
// library states them (MPI_Get_library_version, callable before MPI_Init, up
// to its first comma: "Open MPI v4.1.4"); "none" in a build without MPI.
[[nodiscard]] std::string mpi_library();

// True when this process was started by mpirun/mpiexec (Open MPI, MPICH or
// PMIx): read from the environment, so a build without MPI has it too
// (defined in exec/mpirun.cpp).
[[nodiscard]] bool launched_by_mpirun();

}  // namespace coconet::exec
