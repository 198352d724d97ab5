// Checks at the CUDA / NCCL / cuBLAS / MPI boundary (after nccl-tests'
// common.h): every call into one of these libraries goes through a
// COCONET_*_CHECK macro, and a failure throws DeviceError with the host, the
// rank, file:line, the call as written and the library's own error string.
//
// The rank is process-wide context set once by the backend after MPI starts
// (set_error_rank); before that, messages say "rank ?".
#pragma once

#include <string>
#include <string_view>

#include "model/error.h"

namespace coconet::kernels::cuda {

// A CUDA, NCCL, cuBLAS or MPI call failed: the run did not complete (CLI exit 1).
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

// Each throws DeviceError when `status` is not the library's success value.
void check_cuda(int status, const CallSite& site);
void check_nccl(int status, const CallSite& site);
void check_cublas(int status, const CallSite& site);
void check_mpi(int status, const CallSite& site);

}  // namespace coconet::kernels::cuda

#define COCONET_CALL_SITE(call) \
  ::coconet::kernels::cuda::CallSite { #call, __FILE__, __LINE__ }
#define COCONET_CUDA_CHECK(call) \
  ::coconet::kernels::cuda::check_cuda(static_cast<int>(call), COCONET_CALL_SITE(call))
#define COCONET_NCCL_CHECK(call) \
  ::coconet::kernels::cuda::check_nccl(static_cast<int>(call), COCONET_CALL_SITE(call))
#define COCONET_CUBLAS_CHECK(call) \
  ::coconet::kernels::cuda::check_cublas(static_cast<int>(call), COCONET_CALL_SITE(call))
#define COCONET_MPI_CHECK(call) \
  ::coconet::kernels::cuda::check_mpi(static_cast<int>(call), COCONET_CALL_SITE(call))
// After a kernel launch: reports a bad launch configuration at the launch site.
#define COCONET_CUDA_CHECK_LAUNCH() COCONET_CUDA_CHECK(cudaGetLastError())
