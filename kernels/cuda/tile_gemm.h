// The cuda backend's overlap: tile: one GEMM over the whole output whose
// row blocks are written in the order the collective takes them, each block
// published in device memory when its last tile is written (tile_gemm), and
// one communication kernel on NCCL's device API (LSA: load/store access to
// every peer's symmetric window), on another stream, that takes each block
// as its flag completes, waits for every peer at an LSA barrier, and
// reduce-scatters (or all-reduces, in place in the windows) the block
// (tile_comm). The plans both launch from are host-side (tile_plan.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/lsa_comm.h"
#include "kernels/cuda/tile_plan.h"
#include "model/program.h"
#include "model/types.h"

namespace coconet::kernels::cuda {

// C = A B, row-major with row strides lda, ldb, ldc (elements). A and B share
// ab_dtype; f16 and bf16 run on tensor cores (WMMA, f32 accumulation), f32
// on the CUDA cores in f32. C is stored as c_dtype into `c` and, when not
// null, at the same element offsets into `c_window` (a symmetric window the
// communication kernel reads).
struct TileGemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  void* c_window = nullptr;
  model::DType ab_dtype = model::DType::f16;
  model::DType c_dtype = model::DType::f16;
  std::int64_t n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
};

// Device words a tile unit's kernels share: flags [0, kMaxTileBlocks) count
// each block's written tiles, the last word is the GEMM's ticket counter.
inline constexpr int kTileFlagWords = kMaxTileBlocks + 1;

// Zeroes the flags and the ticket counter on `stream` (before both kernels).
void reset_tile_flags(unsigned* flags, cudaStream_t stream);

// Queues the GEMM of `plan`'s tiles on `stream`, tiles taken in ticket order;
// each written tile adds 1 to flags[its block] (release). Throws UserError on
// bad arguments (validate_tile_gemm). Launch it before tile_comm: the GEMM
// waits on nothing, the communication kernel waits on the GEMM, so only
// this order completes where kernels are serialised (CUDA_LAUNCH_BLOCKING=1).
void tile_gemm(const TileGemmArgs& args, const TileGemmPlan& plan, unsigned* flags,
               cudaStream_t stream);

// What tile_gemm refuses, without a GPU: null operands, strides shorter than
// a row, a plan past the kernel's limits (segments, blocks; a run past 32-bit
// rows or tickets is refused when the plan is made, plan_tile_gemm).
void validate_tile_gemm(const TileGemmArgs& args, const TileGemmPlan& plan);

// Queues the communication kernel on `stream`: for each block b in order,
// waits until flags[b] reaches gemm.block_tiles[b] (acquire), then an LSA
// barrier (every peer has written block b), then comm's steps of block b:
// reads each peer's window in comm.peers order, reduces with `op` in f32 and
// stores to `out` (reduce-scatter) or into every peer's window at the same
// place (allreduce); an LSA barrier at the end (every peer's stores visible,
// no peer reads this rank's window after). `window` holds the GEMM's result
// as `dtype`; allreduce copies come after (the caller's, comm.copies).
void tile_comm(const LsaComm& lsa, const TileCommPlan& comm, const TileGemmPlan& gemm,
               const unsigned* flags, const SymmetricBuffer& window, void* out, model::ReduceOp op,
               bool in_place, cudaStream_t stream);

}  // namespace coconet::kernels::cuda
