// The message size at which the MPI library's shared-memory transport changes
// protocol, read from the library itself (`ompi_info`), so that the
// two-regime collective fit (validation/fit_regimes.h) can take its threshold
// from the library rather than from the data.
#pragma once

#include <optional>
#include <string>

namespace coconet::validation {

struct MpiLimit {
  double bytes = 0;
  std::string source;  // the command and the parameter it was read from
};

// The command that lists Open MPI's byte transfer layer parameters.
inline constexpr const char* kOmpiInfoCommand = "ompi_info --parsable --param btl all --level 9";

// One byte past the shared-memory BTL's largest send fragment
// (`btl_sm_max_send_size`, named `btl_vader_max_send_size` before Open MPI 5)
// in `ompi_info --parsable` output: the first size of MPI's large-message
// regime; empty when it is not there.
[[nodiscard]] std::optional<MpiLimit> parse_ompi_info(const std::string& text);

// Runs kOmpiInfoCommand and parses it; empty when ompi_info is absent or fails.
[[nodiscard]] std::optional<MpiLimit> read_mpi_limit();

}  // namespace coconet::validation
