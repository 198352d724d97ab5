// Which fused ops of a plan the cuda backend can run as the generated single
// kernel over an LSA team (kernels/cuda/fused_program_lsa.h), and the role
// and symmetric window of every operand of its program when it can:
//   fuse(RS-C-AG): one pass, no norms; the head's result is the reduced
//     input (read from the window of the reduce-scatter's operand), outputs
//     that an allgather finishes are stored into the gathered value's
//     window, the others (sliced state) stay local;
//   fuse(AR-C): one pass, no norms; the reduced input as above, every output
//     gathered into its own value's window.
// Everything else (a norm phase, several passes, a send head) keeps the host
// path: NCCL host calls per piece (exec/fused_call.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/lsa_program_plan.h"
#include "model/program.h"
#include "plan/fused_form.h"

namespace coconet::exec::cuda {

struct LsaFusedRoles {
  std::vector<kernels::cuda::LsaRole> inputs;   // per program input slot
  std::vector<kernels::cuda::LsaRole> outputs;  // per program output slot
  std::vector<std::string> input_windows;  // per input: the value whose window it reads ("": local)
  std::vector<std::string> output_windows;  // per output: the value it is gathered into ("": local)
};

// The roles, or nullopt with the reason (in words for the run's notes) in `why`.
[[nodiscard]] std::optional<LsaFusedRoles> lsa_single_kernel(const plan::FusedForm& form,
                                                             const model::Program& program,
                                                             std::string& why);

}  // namespace coconet::exec::cuda
