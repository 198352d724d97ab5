// Checks at the CUDA / NCCL / cuBLAS boundary (after nccl-tests' common.h):
// every call into one of these libraries goes through a COCONET_*_CHECK
// macro, and a failure throws DeviceError with the host, the rank, file:line,
// the call as written and the library's own error string (kernels/check.h).
// MPI calls are checked by COCONET_MPI_CHECK (kernels/mpi_check.h).
#pragma once

#include "kernels/check.h"

namespace coconet::kernels::cuda {

// Each throws DeviceError when `status` is not the library's success value.
void check_cuda(int status, const CallSite& site);
void check_nccl(int status, const CallSite& site);
void check_cublas(int status, const CallSite& site);

}  // namespace coconet::kernels::cuda

#define COCONET_CUDA_CHECK(call) \
  ::coconet::kernels::cuda::check_cuda(static_cast<int>(call), COCONET_CALL_SITE(call))
#define COCONET_NCCL_CHECK(call) \
  ::coconet::kernels::cuda::check_nccl(static_cast<int>(call), COCONET_CALL_SITE(call))
#define COCONET_CUBLAS_CHECK(call) \
  ::coconet::kernels::cuda::check_cublas(static_cast<int>(call), COCONET_CALL_SITE(call))
// After a kernel launch: reports a bad launch configuration at the launch site.
#define COCONET_CUDA_CHECK_LAUNCH() COCONET_CUDA_CHECK(cudaGetLastError())
