// Recognising a fuse(RS-C-AG) stage as an optimizer update that the cuda
// backend's fused-allreduce kernels compute: a reducescatter (sum) of a 1-D
// gradient, element-wise statements on its shard, and the allgather of the
// new weights. The statements are recognised by what they compute, not by how
// they are written: the stage's compiled element-wise program is evaluated at
// probe points and must give the SGD or Adam formula (with the program's
// scalars lr, beta1, beta2, eps) under some assignment of operands to roles.
// Adam is recognised only with its moments kept sliced (as_slice(m),
// as_slice(v)): the kernels update this rank's shard of the moments in place
// and gather nothing but the weights. Types only: the answer is the same on
// every rank and at every size.
#pragma once

#include <optional>
#include <string>

#include "model/program.h"
#include "model/schedule.h"
#include "plan/capabilities.h"

namespace coconet::plan {

// Hyperparameters of the update, the program's scalars (sgd uses lr only).
struct FusedHyper {
  double lr = 0.0;
  double beta1 = 0.0;
  double beta2 = 0.0;
  double eps = 0.0;
  friend bool operator==(const FusedHyper&, const FusedHyper&) = default;
};

// The values of the stage in their roles:
//   g       the local gradient (the reducescatter's input), 1-D
//   g_shard the reducescatter's output, this rank's shard
//   w       the weights before the step, replicated; read, never written
//   w_out   the new weights, replicated (the allgather's output)
//   m, v, m_out, v_out  adam: the moments before and after, sliced
struct FusedUpdateMatch {
  FusedUpdate update = FusedUpdate::sgd;
  FusedHyper hyper;
  std::string g, g_shard, w, w_out;
  std::string m, v, m_out, v_out;
  friend bool operator==(const FusedUpdateMatch&, const FusedUpdateMatch&) = default;
};

[[nodiscard]] std::optional<FusedUpdateMatch> match_fused_update(const model::Program& program,
                                                                 const model::Stage& stage);

}  // namespace coconet::plan
