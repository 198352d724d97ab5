// The cuda backend: one GPU per rank, NCCL communicators bootstrapped over
// MPI under mpirun (one rank without MPI otherwise), cuBLAS GEMMs, coconet's CUDA kernels, a compute and a comm stream
// with events between them, and the NCCL watchdog (see exec/backend.h for the
// contract every backend keeps).
#pragma once

#include <memory>
#include <string>

#include "exec/backend.h"

namespace coconet::exec::cuda {

// Whether this process can use a GPU, and if not, why (in words fit for the
// user: no device, no driver, ...). Touches no MPI; cheap.
struct Availability {
  bool ok = false;
  std::string reason;
};
[[nodiscard]] Availability probe();
[[nodiscard]] bool available();

// The message `coconet run --backend cuda` prints on a machine without a
// usable GPU (a UserError, so the CLI exits 2).
[[nodiscard]] std::string unavailable_message(const Availability& a);

// Creates the backend: checks for a GPU first (UserError when none); under
// mpirun initialises MPI, picks the node-local GPU and joins the NCCL
// communicator; a single process not started by mpirun takes GPU 0 and a
// one-rank communicator without touching MPI.
[[nodiscard]] std::unique_ptr<Backend> create();

}  // namespace coconet::exec::cuda
