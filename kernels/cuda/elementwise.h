// Generic element-wise stages on the GPU: the backend-neutral postfix program
// of model/elementwise_program.h (the same one the cpu backend runs),
// evaluated one element per thread. Operands are typed device pointers with
// the program's (i, j) -> element Access, so slices, row chunks and
// broadcast operands need no copies.
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "model/elementwise_program.h"

namespace coconet::kernels::cuda {

// The longest program one launch carries in its parameters (8 KiB of the
// 32 KiB kernel-parameter space of sm_70+ with CUDA 12.1+).
inline constexpr int kMaxProgramLength = 256;

struct ElementwiseOperand {
  void* data = nullptr;
  model::DType dtype = model::DType::f32;
  model::Access access;
};

// Throws UserError when the program or operand counts exceed the limits or
// operand dtypes differ from the program's.
void validate(const model::ElementwiseProgram& program, std::span<const ElementwiseOperand> inputs,
              std::span<const ElementwiseOperand> outputs);

// Evaluates `program` at every element of `block`; queued on `stream`.
void elementwise(const model::ElementwiseProgram& program, std::span<const ElementwiseOperand> inputs,
                 std::span<const ElementwiseOperand> outputs, const model::Block& block,
                 cudaStream_t stream);

}  // namespace coconet::kernels::cuda
