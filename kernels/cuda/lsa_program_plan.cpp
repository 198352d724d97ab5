// Roles, shard and vector head of the generated single-kernel fused op (see
// lsa_program_plan.h).
#include "kernels/cuda/lsa_program_plan.h"

#include <string>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/view.h"
#include "model/error.h"

namespace coconet::kernels::cuda {
namespace {

constexpr const char* kWhere = "fused op (single kernel over the LSA team)";

void check_roles(const model::ElementwiseProgram& program, std::span<const LsaOperandPlace> inputs,
                 std::span<const LsaOperandPlace> outputs) {
  if (inputs.size() != program.input_types.size() || outputs.size() != program.output_types.size())
    throw UserError(std::string(kWhere) + ": operand count differs from the program's");
  int reduced = 0;
  for (const auto& in : inputs) {
    if (in.role == LsaRole::gathered)
      throw UserError(std::string(kWhere) +
                      ": an input cannot be gathered; only outputs are stored into peers");
    reduced += in.role == LsaRole::reduced ? 1 : 0;
  }
  if (reduced != 1)
    throw UserError(std::string(kWhere) +
                    ": the program must read exactly one reduced input (the head "
                    "collective's result), not " +
                    std::to_string(reduced));
  for (const auto& out : outputs)
    if (out.role == LsaRole::reduced)
      throw UserError(std::string(kWhere) +
                      ": an output cannot be reduced; reduction feeds an input");
  if (static_cast<int>(program.code.size()) > kMaxProgramLength)
    throw UserError(std::string(kWhere) + ": " + std::to_string(program.code.size()) +
                    " instructions exceed the limit of " + std::to_string(kMaxProgramLength) +
                    "; fuse fewer statements into this stage");
  if (program.stack_depth > model::kMaxStack)
    throw UserError(std::string(kWhere) + ": too deep an expression");
}

// Whether operand `o` (of `bytes` per element) is 16-byte aligned at element `e` of the shard.
bool aligned_at(const LsaOperandPlace& o, int bytes_per_element, std::int64_t shard_begin,
                std::int64_t e) {
  const auto bytes = static_cast<std::uintptr_t>(bytes_per_element);
  const auto local_at = [&](std::uintptr_t a) {
    return (a + static_cast<std::uintptr_t>(e) * bytes) % kVecBytes == 0;
  };
  const auto window_at = [&] {
    return (static_cast<std::uintptr_t>(shard_begin + e) * bytes) % kVecBytes == 0;
  };
  switch (o.role) {
    case LsaRole::local:
      return local_at(o.local_address);
    case LsaRole::reduced:
      return window_at();
    case LsaRole::gathered:
      return window_at() && (o.local_address == 0 || local_at(o.local_address));
  }
  return false;
}

int vector_head(const model::ElementwiseProgram& program, std::span<const LsaOperandPlace> inputs,
                std::span<const LsaOperandPlace> outputs, std::int64_t shard_begin) {
  for (int head = 0; head < kVecElems; ++head) {
    bool all = true;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      all = all && aligned_at(inputs[k], storage_bytes(program.input_types[k]), shard_begin, head);
    for (std::size_t k = 0; k < outputs.size(); ++k)
      all =
          all && aligned_at(outputs[k], storage_bytes(program.output_types[k]), shard_begin, head);
    if (all) return head;
  }
  return -1;
}

}  // namespace

int reduced_slot(std::span<const LsaOperandPlace> inputs) {
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].role == LsaRole::reduced) return static_cast<int>(k);
  return -1;
}

LsaShardPlan plan_lsa_shard(const model::ElementwiseProgram& program,
                              std::span<const LsaOperandPlace> inputs,
                              std::span<const LsaOperandPlace> outputs, std::int64_t n,
                              int lsa_size, int lsa_rank) {
  if (n < 0 || lsa_size < 1 || lsa_rank < 0 || lsa_rank >= lsa_size)
    throw UserError(std::string(kWhere) + ": " + std::to_string(n) + " elements over rank " +
                    std::to_string(lsa_rank) + " of " + std::to_string(lsa_size) +
                    " is not a valid split");
  check_roles(program, inputs, outputs);
  LsaShardPlan p;
  p.shard = shard_of(n, lsa_size, lsa_rank);
  p.vec_head = vector_head(program, inputs, outputs, p.shard.begin);
  return p;
}

}  // namespace coconet::kernels::cuda
