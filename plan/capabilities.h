// What a backend can run, as the lowering needs to know it: how its fused
// ops pipeline, and whether a collective in an overlap group stays resident
// across chunks.
// A topology describes hardware only; these are properties of the software
// that will run on it, an input to plan::lower alongside the schedule.
#pragma once

#include <string>

namespace coconet::plan {

enum class BackendKind { cuda, cpu };
[[nodiscard]] std::string to_string(BackendKind b);
// "cuda" or "cpu"; throws UserError naming `flag` and the choices otherwise.
[[nodiscard]] BackendKind parse_backend(const std::string& name, const std::string& flag = "--backend");

struct Capabilities {
  BackendKind backend = BackendKind::cuda;
  // A collective of an overlap group takes chunk after chunk in one call and
  // pays its latency once; false: one call per chunk, each paying it.
  bool resident_overlap = false;
  // Every fused stage runs as one fused op (plan/fused_form.h) that pipelines
  // its rows in pieces of about this many bytes of the head collective's
  // result on rank 0: piece k computes while piece k+1's head collective and
  // piece k-1's allgathers run. Each piece is one call of each collective.
  double fused_piece_bytes = 0;
  // The comm stream computes beside the caller: a fused op's program in an
  // overlap group is queued there (a CUDA stream). False: the comm stream is
  // a thread sharing the rank's core, so a program queued there costs two
  // thread switches and buys nothing unless the caller has more of the unit
  // to compute meanwhile (plan::fused_program_stream).
  bool comm_stream_computes = true;
  // A kernel stage (model/kernel_fusion.h: fuse_kernel, flash_attention)
  // runs as one kernel. The project's executors run its parts (false); the
  // software `coconet step` predicts (Megatron-LM with its fused kernels and
  // flash attention) runs it as one.
  bool fused_kernels = false;
  // The knob overlap: tile (model::Grain) runs: an overlap group of a matmul
  // and the collective of its output as one GEMM over the whole output that
  // completes its row blocks in the collective's order, each block's
  // collective started once the block is done (exec/backend.h, "Tiles").
  // False: plan::lower refuses tile.
  bool tile_overlap = false;
  // Why tile_overlap is false where the backend can say (the cuda backend on
  // a group that is not one LSA team, exec/cuda/cuda_backend.cpp); quoted in
  // the refusal. Empty otherwise.
  std::string no_tile_reason;
  // A tile unit's collective may be a fused op (its program run block by
  // block on the comm stream: the cpu backend). False: only a plain
  // reduce-scatter or allreduce of the matmul's result (the cuda backend's
  // communication kernel reduces, it runs no fused op's program).
  bool tile_fused = true;
  // In a tile unit the collective is one call that takes the blocks as they
  // complete (a communication kernel resident across blocks: its latency
  // once, its transfers at the whole message's rate); false: one call per
  // block, each paying its latency at the block's size (the cpu backend's
  // MPI calls).
  bool tile_one_collective = false;

  friend bool operator==(const Capabilities&, const Capabilities&) = default;
};

// The cuda backend (exec/cuda): NCCL called once per chunk and per piece of a fused op.
[[nodiscard]] Capabilities cuda_capabilities();
// The cpu backend (exec/cpu): MPI called once per chunk and per piece of a fused op.
[[nodiscard]] Capabilities cpu_capabilities();
[[nodiscard]] Capabilities capabilities_of(BackendKind b);

// One line for reports, e.g. "cuda (fused ops pipelined in pieces of 32 MiB; ...)".
[[nodiscard]] std::string describe(const Capabilities& c);

}  // namespace coconet::plan
