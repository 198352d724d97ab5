// The generated fused collective as one kernel on one LSA team (one NVLink
// domain), through NCCL's device API: fuse(RS-C-AG) and fuse(AR-C) for any
// compiled element-wise program (model/elementwise_program.h), the
// generalisation of fused_allreduce.h's hand-written Adam kernel.
//
// Each rank takes its shard of the n elements (shard_of's rule). Per
// element: the reduced input is the f32 sum of every peer's symmetric
// window at that element (LSA loads), rounded to the input's dtype as a
// reduce-scatter into a value of that dtype stores it; the other inputs are
// read from this rank's shard; the program runs in registers (eval_element,
// the interpreter's own function); local outputs are written to this
// rank's shard in place, gathered outputs are stored into every peer's
// symmetric window at the element (LSA stores). LSA barriers on entry and
// exit, as the hand-written kernel. fuse(AR-C) is the same kernel with
// every output gathered (each rank computes its shard, every rank ends with
// the whole result).
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "kernels/cuda/lsa_comm.h"
#include "kernels/cuda/lsa_program_plan.h"
#include "model/elementwise_program.h"

namespace coconet::kernels::cuda {

struct LsaOperand {
  LsaRole role = LsaRole::local;
  const SymmetricBuffer* window =
      nullptr;            // reduced, gathered: the full value (n elements) in a window
  void* local = nullptr;  // local: element 0 of this rank's shard; gathered: an optional local copy
                          // of the shard
};

// Queues the kernel on `stream`. The reduced window must hold every rank's
// full input before the launch (written earlier on this stream or
// synchronised); gathered windows hold every rank's result when the kernel
// ends. `global_first` is the global index of element 0 of the n (the key
// of dropout's mask, as the interpreter's). A window may be larger than n.
// Throws UserError when the operands do not fit the program (roles,
// dtypes, sizes, a window both reduced and gathered).
void fused_program_lsa(const LsaComm& comm, const model::ElementwiseProgram& program,
                       std::span<const LsaOperand> inputs, std::span<const LsaOperand> outputs,
                       std::int64_t n, cudaStream_t stream, std::int64_t global_first = 0);

}  // namespace coconet::kernels::cuda
