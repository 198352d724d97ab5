// A plan's fused op (plan/fused_form.h) as this rank's FusedCalls, one per
// chunk of its unit: which rows each piece covers on every position, where
// the head's result and the scratch-only results of each piece go, and the
// views of every collective. Scratch is allocated here, once per op: two
// piece-sized places for the head's result, one per result that only its
// own program reads.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/rank_values.h"
#include "plan/step_plan.h"

namespace coconet::exec {

struct FusedOpCalls {
  std::vector<FusedCall> chunks;    // one per chunk of the op's unit
  std::vector<BufferId> scratch;    // buffers allocated for it
};

// `values` must have been made without buffers for the plan's scratch values
// (fused_scratch_values). Empty when this rank takes no part in the op.
[[nodiscard]] FusedOpCalls build_fused_calls(Backend& b, const plan::StepPlan& p, const plan::Op& op,
                                             const RankValues& values);

// Every value some fused op of the plan keeps in scratch.
[[nodiscard]] std::set<std::string> fused_scratch_values(const plan::StepPlan& p);

}  // namespace coconet::exec
