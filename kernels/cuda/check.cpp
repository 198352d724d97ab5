// Failure reports for the CUDA / NCCL / cuBLAS check macros.
#include "kernels/cuda/check.h"

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <fmt/format.h>

#include "kernels/cuda/cublas_loader.h"

namespace coconet::kernels::cuda {

void check_cuda(int status, const CallSite& site) {
  if (status == cudaSuccess) return;
  const auto err = static_cast<cudaError_t>(status);
  throw DeviceError(failure_message(
      "CUDA", fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err)), site));
}

void check_nccl(int status, const CallSite& site) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  throw DeviceError(
      failure_message("NCCL", ncclGetErrorString(static_cast<ncclResult_t>(status)), site));
}

void check_cublas(int status, const CallSite& site) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  // A cuBLAS status comes only from a loaded library (kernels/cuda/cublas_loader.h).
  const std::string what = cublas_loaded() ? cublas().status_string(static_cast<cublasStatus_t>(status))
                                           : fmt::format("status {}", status);
  throw DeviceError(failure_message("cuBLAS", what, site));
}

}  // namespace coconet::kernels::cuda
