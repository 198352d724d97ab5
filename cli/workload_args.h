// Loading the workload a command names, with its `--set NAME=VALUE` overrides
// applied (sizes and scalars), shared by every command that takes a workload.
#pragma once

#include <string>
#include <vector>

#include "model/program.h"

namespace coconet::cli {

// `name_or_path`: a workload name (workloads/NAME.yaml) or a path to a YAML file.
[[nodiscard]] model::Program load_workload(const std::string& name_or_path,
                                           const std::vector<std::string>& sets);

}  // namespace coconet::cli
