// The capabilities of the two backends, stated once.
#include "plan/capabilities.h"

#include <fmt/core.h>

#include "model/error.h"

namespace coconet::plan {

std::string to_string(FusedUpdate u) { return u == FusedUpdate::sgd ? "sgd" : "adam"; }

std::string to_string(BackendKind b) { return b == BackendKind::cuda ? "cuda" : "cpu"; }

BackendKind parse_backend(const std::string& name, const std::string& flag) {
  if (name == "cuda") return BackendKind::cuda;
  if (name == "cpu") return BackendKind::cpu;
  throw UserError(fmt::format("{} {}: unknown backend; use cuda or cpu", flag, name));
}

Capabilities cuda_capabilities() {
  Capabilities c;
  c.backend = BackendKind::cuda;
  c.fused_updates = {FusedUpdate::adam};  // exec/cuda/cuda_backend.cpp try_fused_allreduce
  c.resident_overlap = false;  // exec/executor.cpp issues one NCCL call per chunk
  c.pipelined_fusions = true;  // NCCL on the comm stream, the program's kernel on the compute stream, per chunk
  return c;
}

Capabilities cpu_capabilities() {
  Capabilities c;
  c.backend = BackendKind::cpu;
  c.resident_overlap = false;  // one MPI call per chunk
  c.pipelined_fusions = true;  // MPI on the communication thread while the rank computes the previous chunk
  return c;
}

Capabilities capabilities_of(BackendKind b) {
  return b == BackendKind::cuda ? cuda_capabilities() : cpu_capabilities();
}

std::string describe(const Capabilities& c) {
  std::string fused;
  for (FusedUpdate u : c.fused_updates) fused += (fused.empty() ? "fuse(RS-C-AG) of " : ", ") + to_string(u);
  if (fused.empty()) fused = "none, fused stages run as their parts";
  return fmt::format("{} (fused ops: {}; overlapped collectives: {}{})", to_string(c.backend), fused,
                     c.resident_overlap ? "resident, latency once" : "one call per chunk",
                     c.pipelined_fusions ? "; other fused stages pipelined in chunks" : "");
}

}  // namespace coconet::plan
