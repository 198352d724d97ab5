// The fused allreduce of an optimizer step, fuse(RS-C-AG): reduce-scatter the
// gradients, update this rank's shard (Adam), allgather the new weights.
//
// Two paths, one result:
// - lsa: one kernel through NCCL's device API. Gradients and weights live in
//   symmetric memory windows (ncclMemAlloc + ncclCommWindowRegister); each
//   rank reads its shard of every peer's gradient with LSA loads, sums in
//   f32, updates m, v, w in registers and stores the new weights straight
//   into every peer's window (LSA stores), with an LSA barrier on entry and
//   exit. Needs every rank of the communicator in one LSA team (one NVLink
//   domain) and a communicator that supports symmetric memory.
// - host: ncclReduceScatter, the fused Adam kernel, ncclAllGather on one
//   stream (collectives.h handles ragged shards). Works everywhere.
// choose_fused_path (lsa_comm.h) picks. Run by the GPU tests and benchmarks
// beside the generic fused path the cuda backend runs (fused_program_lsa.h):
// built into coconet_kernels_cuda_reference, not the production library.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "kernels/cuda/lsa_comm.h"
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/view.h"

namespace coconet::kernels::cuda {

// The step's tensors: full gradient and weights (N elements each), this
// rank's shard of the moments (as_slice: they never leave their shard).
struct FusedAdamArgs {
  DeviceView g;
  DeviceView w;
  DeviceView m;
  DeviceView v;
  AdamHyper h;
};

// One kernel; g and w must be the views of `g_buf` and `w_buf`.
void fused_adam_lsa(const LsaComm& comm, const SymmetricBuffer& g_buf,
                    const SymmetricBuffer& w_buf, const FusedAdamArgs& a, cudaStream_t stream);
// Reduce-scatter + fused Adam + allgather with host-API NCCL; `g_shard` is
// scratch for the reduced gradient shard (shard-sized, g's dtype).
void fused_adam_host(ncclComm_t comm, int rank, int ranks, const FusedAdamArgs& a,
                     DeviceView g_shard, cudaStream_t stream);

}  // namespace coconet::kernels::cuda
