// CPU evaluation of a compiled element-wise program over a block of elements:
// the program runs instruction by instruction over tiles of a row (short,
// vectorisable loops over f32 registers), reading 16-bit inputs as f32 and
// rounding outputs to their storage type. Used by the cpu backend.
#pragma once

#include <cstddef>
#include <span>

#include "model/elementwise_program.h"

namespace coconet::kernels {

// One operand as the cpu sees it: its storage and how element (i, j) maps to it.
struct CpuOperand {
  std::byte* data = nullptr;  // the buffer's first element (inputs are only read)
  model::DType dtype = model::DType::f32;
  model::Access access;
};

// Evaluates `program` at every element of `block`; inputs and outputs follow
// the contract of exec::Backend::elementwise.
void cpu_elementwise(const model::ElementwiseProgram& program, std::span<const CpuOperand> inputs,
                     std::span<const CpuOperand> outputs, const model::Block& block);

// Whether load_f32 / store_f32 convert f16 with F16C instructions (an x86-64
// CPU that has them); else with model/half.h's bit manipulation. Either way
// the values are the same.
[[nodiscard]] bool f16c_conversions();

// Converts `count` stored elements to f32 / from f32 (RNE), with element strides
// (kernels/cpu_convert.cpp).
void load_f32(const std::byte* data, model::DType t, std::int64_t first, std::int64_t stride,
              std::int64_t count, float* out);
void store_f32(std::byte* data, model::DType t, std::int64_t first, std::int64_t stride,
               std::int64_t count, const float* in);

// Rounds `count` f32 values in place to the precision of `t` (a store to `t`
// and a load back), as round_to() of model/elementwise_program.h does.
void round_f32(model::DType t, std::int64_t count, float* x);

}  // namespace coconet::kernels
