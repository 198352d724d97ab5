// Failure reports for the CUDA / NCCL / cuBLAS / MPI check macros.
#include "kernels/cuda/check.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <array>
#include <atomic>

#include <fmt/format.h>

namespace coconet::kernels::cuda {
namespace {

std::atomic<int> g_error_rank{-1};

// POSIX HOST_NAME_MAX is 255 bytes on Linux (limits.h); one more for the NUL.
constexpr std::size_t kHostNameBytes = 256;

std::string host_name() {
  std::array<char, kHostNameBytes> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "?";
  return std::string(buf.data());
}

}  // namespace

void set_error_rank(int rank) { g_error_rank.store(rank); }
int error_rank() { return g_error_rank.load(); }

std::string failure_message(std::string_view library, std::string_view error,
                            const CallSite& site) {
  const int rank = error_rank();
  const std::string rank_text = rank < 0 ? std::string("?") : std::to_string(rank);
  return fmt::format("{} error on host {} rank {} at {}:{}: {}: {}", library, host_name(), rank_text,
                     site.file, site.line, site.call, error);
}

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
  throw DeviceError(
      failure_message("cuBLAS", cublasGetStatusString(static_cast<cublasStatus_t>(status)), site));
}

void check_mpi(int status, const CallSite& site) {
  if (status == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> buf{};
  int len = 0;
  if (MPI_Error_string(status, buf.data(), &len) != MPI_SUCCESS) len = 0;
  const std::string text = len > 0 ? std::string(buf.data(), static_cast<std::size_t>(len))
                                   : fmt::format("MPI error code {}", status);
  throw DeviceError(failure_message("MPI", text, site));
}

}  // namespace coconet::kernels::cuda
