// Host-side preparation of the generated single-kernel fused op
// (fused_program_lsa.h): the role each operand of a compiled element-wise
// program plays in it, the shard this rank updates, and where the 16-byte
// vector groups start. Plain C++ (no CUDA, no NCCL), so the checks run and
// are tested on any machine.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cuda/grid.h"
#include "model/elementwise_program.h"

namespace coconet::kernels::cuda {

enum class LsaRole : std::uint8_t {
  reduced,  // input: the sum over the LSA team of one symmetric window, at this rank's shard
  local,  // input or output: this rank's shard in its own memory (state read and written in place)
  gathered,  // output: stored into every peer's symmetric window at this rank's shard
};

// Where an operand's element 0 of this rank's shard lives, for the alignment
// check: a local operand's address; a window operand's byte offset in its
// window (window bases are aligned to NCCL_WIN_REQUIRED_ALIGNMENT, a
// multiple of 16 bytes), which plan_lsa_shard computes from the shard.
struct LsaOperandPlace {
  LsaRole role = LsaRole::local;
  std::uintptr_t local_address =
      0;  // local: element 0 of the shard; gathered: an optional local copy (0: none)
};

struct LsaShardPlan {
  Span1d shard;       // elements [begin, begin + size) of the full value this rank updates
  int vec_head = -1;  // scalar elements before the 16-byte groups; -1: every element scalar
};

// Checks the roles against the program (exactly one reduced input, no
// reduced output, no gathered input, operand counts and limits) and
// plans the shard of rank `lsa_rank` of `lsa_size` over `n` elements.
// Throws UserError naming what is wrong.
[[nodiscard]] LsaShardPlan plan_lsa_shard(const model::ElementwiseProgram& program,
                                            std::span<const LsaOperandPlace> inputs,
                                            std::span<const LsaOperandPlace> outputs,
                                            std::int64_t n, int lsa_size, int lsa_rank);

// The input slot the reduction feeds (the one reduced input); -1 when none.
[[nodiscard]] int reduced_slot(std::span<const LsaOperandPlace> inputs);

}  // namespace coconet::kernels::cuda
