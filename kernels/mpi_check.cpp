// The MPI check: MPI's error string for a failed call.
#include "kernels/mpi_check.h"

#include <mpi.h>

#include <array>

#include <fmt/format.h>

namespace coconet::kernels {

void check_mpi(int status, const CallSite& site) {
  if (status == MPI_SUCCESS) return;
  std::array<char, MPI_MAX_ERROR_STRING> buf{};
  int len = 0;
  if (MPI_Error_string(status, buf.data(), &len) != MPI_SUCCESS) len = 0;
  const std::string text = len > 0 ? std::string(buf.data(), static_cast<std::size_t>(len))
                                   : fmt::format("MPI error code {}", status);
  throw DeviceError(failure_message("MPI", text, site));
}

}  // namespace coconet::kernels
