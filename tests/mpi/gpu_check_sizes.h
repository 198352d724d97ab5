// What scripts/gpu-check.sh runs the Megatron blocks with on the GPU (its
// MEGATRON_SIZES and INTERPRETER_LIMIT lines, read from the script so that
// the two never drift apart), and the run of the tests that show a wrong
// GEMM at those sizes is caught (cpu under MPI, and cuda).
#pragma once

#include <array>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "exec/runtime.h"
#include "exec/verify.h"
#include "model/error.h"
#include "model/program.h"
#include "perturbing_backend.h"

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

// The reference interpreter's verdicts on `p` at `sizes` run on a fresh
// `backend` ("cpu" or "cuda"), one rank, fault-free and with a wrong GEMM (a
// right verifier passes the first and fails the second). The interpreter
// runs once: it runs on the host, so its outputs do not depend on the
// backend's fault (at these sizes it is most of the time).
inline std::array<Verdict, 2> wrong_gemm_verdicts(const std::string& backend, const model::Program& p,
                                                  const model::Bindings& sizes, const RunOptions& options) {
  std::array<Verdict, 2> out;
  std::optional<Outputs> interpreter;
  for (const Fault fault : {Fault::none, Fault::wrong_gemm}) {
    PerturbingBackend b(make_backend(backend), fault, 0);
    b.set_groups(1);
    RunOptions pass = options;
    if (interpreter) pass.interpreter_limit = 0;
    References refs = compute_references(b, p, sizes, pass);
    if (!interpreter) interpreter = std::move(refs.interpreter);
    if (!interpreter) throw UserError(p.name + ": past the interpreter limit gpu-check.sh passes");
    out[fault == Fault::none ? 0 : 1] = verify(b, p.outputs, refs.program, *interpreter, -1.0, "reference interpreter");
  }
  return out;
}

}  // namespace coconet::exec::testing
