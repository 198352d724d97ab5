// A fused op's call (exec/backend.h FusedCall) as one launch of the
// generated single LSA kernel (kernels/cuda/fused_program_lsa.h), with
// staging copies: the head's input is copied into a symmetric window before
// the kernel and every gathered result is copied out of its window after
// it, because the backend's buffers are plain cudaMalloc memory, not
// registered windows. Host-side and backend-neutral (views, not pointers),
// so it is tested without a GPU.
//
// Taken when the call is one pass of one piece without norms: one
// reduce-scatter head (its parts one contiguous run, split by shard_of's
// rule) with one program over this rank's shard and allgathers whose parts
// are one contiguous run, or one allreduce head with one program over the
// whole range and no gathers; every operand contiguous over the block, in
// the program's dtypes. Anything else keeps the host path (run_fused).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "kernels/cuda/lsa_program_plan.h"

namespace coconet::exec::cuda {

struct LsaCallPlan {
  const model::ElementwiseProgram* program = nullptr;
  std::int64_t n = 0;             // elements of the full range the op covers
  std::int64_t global_first = 0;  // global index of element 0 of the range (dropout's key)
  View reduced_source;            // the n elements the head reduces: copied into a window
  std::vector<kernels::cuda::LsaRole> in_roles, out_roles;
  std::size_t reduced_slot = 0;  // the input the head's reduction feeds
  std::vector<View> in_local;  // local inputs: this rank's shard (unused for the reduced one)
  std::vector<View>
      out_local;  // local outputs: the shard; gathered: a local copy too (count 0: none)
  std::vector<View> out_dest;  // gathered: the n elements its window is copied to
};

// The plan for `call` on group position `position` of `ranks`, or nullopt
// with the reason in `why`. `dtype_of` gives a buffer's dtype.
[[nodiscard]] std::optional<LsaCallPlan> plan_lsa_call(
    const FusedCall& call, int position, int ranks,
    const std::function<model::DType(BufferId)>& dtype_of, std::string& why);

}  // namespace coconet::exec::cuda
