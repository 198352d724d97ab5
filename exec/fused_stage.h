// Recognising a fuse(RS-C-AG) stage as an optimizer update a backend can run
// as one fused collective (Backend::try_fused_allreduce): a reducescatter
// (sum) of a 1-D gradient, element-wise statements on its shard, and the
// allgather of the new weights. The statements are recognised by what they
// compute, not by how they are written: the stage's compiled element-wise
// program is evaluated at probe points and must give the SGD or Adam formula
// of kernels/cuda/optimizer.h with the program's scalars lr (and beta1,
// beta2, eps), every operand in one of the roles of FusedStageSpec. Adam is
// recognised only with its moments kept sliced (as_slice(m), as_slice(v)):
// the fused kernels update the moments of this rank's shard in place and
// gather nothing but the weights.
#pragma once

#include <optional>

#include "exec/backend.h"
#include "exec/plan.h"
#include "model/program.h"
#include "model/schedule.h"

namespace coconet::exec {

// The spec of `stage` on this rank (views into the plan's buffers, which
// must be allocated), or nullopt when the stage is not a fused allreduce of
// a recognised update. Same answer on every rank of a group.
[[nodiscard]] std::optional<FusedStageSpec> recognise_fused_allreduce(const model::Program& program,
                                                                      const model::Stage& stage, const Plan& plan);

}  // namespace coconet::exec
