// What the check macros at the library boundary share (after nccl-tests'
// common.h): every call into CUDA, NCCL, cuBLAS or MPI goes through a
// COCONET_*_CHECK macro (kernels/cuda/check.h, kernels/mpi_check.h), and a
// failure throws DeviceError with the host, the rank, file:line, the call as
// written and the library's own error string.
//
// The rank is process-wide context set once by a backend after MPI starts
// (set_error_rank); before that, messages say "rank ?". Plain C++ with no
// library of its own, so the cpu backend, the cuda backend and nvcc all use it.
#pragma once

#include <string>
#include <string_view>

#include "model/error.h"

namespace coconet::kernels {

// A call into CUDA, NCCL, cuBLAS or MPI failed, or device work never
// finished: the run did not complete (CLI exit 1).
class DeviceError : public RunFailure {
 public:
  explicit DeviceError(const std::string& message) : RunFailure(message) {}
};

// The rank named in failure messages (-1: not known yet).
void set_error_rank(int rank);
[[nodiscard]] int error_rank();

// Where a failing call was made.
struct CallSite {
  const char* call = "";
  const char* file = "";
  int line = 0;
};

// "<library> error on host <h> rank <r> at <file>:<line>: <call>: <error>".
[[nodiscard]] std::string failure_message(std::string_view library, std::string_view error,
                                          const CallSite& site);

}  // namespace coconet::kernels

#define COCONET_CALL_SITE(call) \
  ::coconet::kernels::CallSite { #call, __FILE__, __LINE__ }
