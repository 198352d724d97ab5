// What a backend can run, as the lowering needs to know it: which fused
// stages it runs as one op, whether a collective in an overlap group stays
// resident across chunks, and whether it pipelines in chunks the fused stages
// it does not run whole.
// A topology describes hardware only; these are properties of the software
// that will run on it, an input to plan::lower alongside the schedule.
#pragma once

#include <set>
#include <string>

namespace coconet::plan {

enum class BackendKind { cuda, cpu };
[[nodiscard]] std::string to_string(BackendKind b);
// "cuda" or "cpu"; throws UserError naming `flag` and the choices otherwise.
[[nodiscard]] BackendKind parse_backend(const std::string& name, const std::string& flag = "--backend");

// The optimizer updates a fuse(RS-C-AG) stage can be recognised as
// (plan/fused_match.h; the formulas of workloads/sgd.yaml and adam.yaml).
enum class FusedUpdate { sgd, adam };
[[nodiscard]] std::string to_string(FusedUpdate u);

struct Capabilities {
  BackendKind backend = BackendKind::cuda;
  // The recognised fuse(RS-C-AG) updates it runs as one fused op; any other
  // fused stage runs as its parts, one after another.
  std::set<FusedUpdate> fused_updates;
  // A collective of an overlap group takes chunk after chunk in one call and
  // pays its latency once; false: one call per chunk, each paying it.
  bool resident_overlap = false;
  // Whether a fused stage it does not run as one fused op is pipelined: cut
  // into Knobs::chunks row chunks whose collectives and computation overlap
  // (chunk k computes while chunk k+1's reduce-scatter and chunk k-1's
  // all-gather run on the comm stream), each element read and written once.
  bool pipelined_fusions = true;

  friend bool operator==(const Capabilities&, const Capabilities&) = default;
};

// The cuda backend (exec/cuda): NCCL called once per chunk; fuse(RS-C-AG) of
// an Adam update with sliced moments through its fused-allreduce kernel.
[[nodiscard]] Capabilities cuda_capabilities();
// The cpu backend (exec/cpu): MPI called once per chunk; no fused kernels.
[[nodiscard]] Capabilities cpu_capabilities();
[[nodiscard]] Capabilities capabilities_of(BackendKind b);

// One line for reports, e.g. "cuda (fused ops: fuse(RS-C-AG) of adam; ...)".
[[nodiscard]] std::string describe(const Capabilities& c);

}  // namespace coconet::plan
