// The cpu backend: one MPI rank per process, host memory, compute on the
// calling thread (kernels/cpu_*), communication through MPI on a comm thread.
#pragma once

#include <memory>

#include "exec/backend.h"

namespace coconet::exec::cpu {

// Creates the backend (initialising MPI); see exec/backend.h for the contract.
[[nodiscard]] std::unique_ptr<Backend> create();

}  // namespace coconet::exec::cpu
