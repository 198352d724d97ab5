// Kernel choices of a schedule: which of its computations run as one kernel.
// Two stage-level transformations, recorded in the history like fuse:
//
// - fuse_kernel: a compute stage's statements (element-wise statements, row
//   reductions, norms) run as one kernel that reads what the stage reads
//   from before it once and writes only what is read after it: Megatron-LM's
//   fused kernels (fused LayerNorm/RMSNorm, fused softmax, bias+GeLU's
//   backward) where the DSL writes a norm or a softmax as several
//   statements, each of which the lowering makes its own kernel and pass
//   over memory otherwise.
// - flash_attention: an attention core, stages from a batched GEMM to a
//   batched GEMM with a row reduction between them (the forward's scores,
//   softmax and context; the backward's four GEMMs around the softmax's
//   backward), runs as one kernel (Dao et al. 2022, FlashAttention): the
//   score-shaped values stay on chip, so none is written to or read from
//   memory, and a score-shaped input (the saved probabilities of the
//   backward) is recomputed from the others instead of read.
//
// Neither changes the program, so every such schedule computes what the
// program computes; the executors run a kernel stage as its parts (they have
// no fused kernels), and the lowering prices it as one kernel only for
// software that has them (plan::Capabilities::fused_kernels: `coconet step`,
// which predicts Megatron-LM). Both must come after the program-level
// transformations, as fuse and overlap do.
#pragma once

#include <string>
#include <vector>

#include "model/schedule.h"

namespace coconet::model {

// The attention masks flash_attention records: "causal" (the kernel skips
// the blocks above the diagonal) or "full".
inline constexpr std::string_view kCausalMask = "causal";
inline constexpr std::string_view kFullMask = "full";
// The share of a causal attention's score blocks a flash kernel computes:
// those on and below the diagonal, (n + 1) / (2 n) of n x n blocks, taken as
// 1/2 (n = s / 128 is 64 at s = 8192: 0.508).
inline constexpr double kCausalShare = 0.5;

// fuse_kernel: the compute stage whose first statement is `first` and last
// `last` becomes one kernel stage. Needs: a whole compute stage of at least
// two statements, not in an overlap group.
[[nodiscard]] Schedule fuse_kernel(Schedule s, const std::string& first, const std::string& last);

// flash_attention: stages from the one holding `first` to the one holding
// `last` become one kernel stage. Needs: `first` and `last` are batched
// GEMMs (results of three or more dimensions) that begin and end their
// stages; every stage between is a compute stage or a batched GEMM; there is
// a row reduction among them (the softmax); none is overlapped; `mask` is
// causal or full.
[[nodiscard]] Schedule flash_attention(Schedule s, const std::string& first, const std::string& last,
                                       const std::string& mask);

// What the kernel choices add to `s`: `s` itself, then (where legal) every
// compute stage of two or more statements fused (fuse_kernel), every
// attention core as flash attention with `mask`, and both. Schedules with
// stage transformations keep theirs; the choices apply to what is left.
[[nodiscard]] std::vector<Schedule> kernel_choices(const Schedule& s, const std::string& mask);

// Whether `s` runs some attention core as flash attention.
[[nodiscard]] bool uses_flash_attention(const Schedule& s);
// Whether `s` fuses some compute stage into one kernel.
[[nodiscard]] bool uses_fused_kernels(const Schedule& s);

}  // namespace coconet::model
