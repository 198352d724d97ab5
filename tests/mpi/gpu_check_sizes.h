// What scripts/gpu-check.sh runs the Megatron blocks with on the GPU (its
// MEGATRON_SIZES and INTERPRETER_LIMIT lines, read from the script so that
// the two never drift apart), for the tests that show a wrong GEMM at those
// sizes is caught.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "model/error.h"
#include "model/program.h"

namespace coconet::exec::testing {

// The value of `readonly NAME=...` in gpu-check.sh, quotes removed.
inline std::string gpu_check_setting(const std::string& source_root, const std::string& name) {
  std::ifstream script(source_root + "/scripts/gpu-check.sh");
  const std::string key = "readonly " + name + "=";
  for (std::string line; std::getline(script, line);) {
    if (line.rfind(key, 0) != 0) continue;
    std::string value = line.substr(key.size());
    if (!value.empty() && value.front() == '"') value = value.substr(1, value.rfind('"') - 1);
    return value;
  }
  throw UserError("no `" + key + "` line in " + source_root + "/scripts/gpu-check.sh");
}

// `program` bound with gpu-check.sh's MEGATRON_SIZES ("B=2 S=256 H=768").
inline model::Bindings gpu_check_megatron_sizes(const model::Program& program, const std::string& source_root) {
  std::istringstream sets(gpu_check_setting(source_root, "MEGATRON_SIZES"));
  model::Bindings b;
  for (std::string set; sets >> set;) b[set.substr(0, set.find('='))] = std::stoll(set.substr(set.find('=') + 1));
  return program.bind(b);
}

inline std::int64_t gpu_check_interpreter_limit(const std::string& source_root) {
  return std::stoll(gpu_check_setting(source_root, "INTERPRETER_LIMIT"));
}

}  // namespace coconet::exec::testing
