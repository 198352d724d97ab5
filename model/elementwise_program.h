// A compiled element-wise computation, shared by every backend: one or more
// statements (a fused kernel) turned into a compact postfix program over f32
// registers. compile_elementwise() builds it from model expressions; the cpu
// backend evaluates it over blocks of elements (kernels/cpu_elementwise.h), the
// cuda backend one element per thread with eval_element() below.
//
// Design notes
// - Scalars and constant subexpressions are folded in double at compile time,
//   so the program holds only loads, f32 arithmetic, rounding and dropout.
// - A fused kernel computes several statements; a later statement that reads
//   an earlier one gets its value from a register (rounded to the earlier
//   statement's dtype, exactly what it would read back from memory).
// - An element (i, j) of a block is addressed per operand through an Access
//   (base + i*row_stride + j*col_stride), which covers contiguous tensors,
//   slices, row chunks and broadcast operands (stride 0) alike.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/half.h"
#include "model/expr.h"
#include "model/host_device.h"
#include "model/ops.h"
#include "model/types.h"

namespace coconet::model {

// Limits of a program, so a device can evaluate it with fixed-size arrays.
inline constexpr int kMaxStack = 16;
inline constexpr int kMaxInputs = 16;
inline constexpr int kMaxOutputs = 8;

enum class OpCode : std::uint8_t {
  load,         // push input `slot`
  load_output,  // push the value output `slot` got earlier in this program
  constant,     // push `value`
  unary,        // pop a, push op(a)            (op: UnaryOp)
  binary,       // pop b, pop a, push op(a, b)  (op: BinaryOp)
  select,       // pop b, pop a, pop c, push c != 0 ? a : b
  round,        // round the top to `dtype` (a cast)
  dropout,      // top = dropout(top, value, seed, global index)
  store,        // pop into output `slot`, rounded to output_types[slot]
};

struct Instr {
  OpCode code = OpCode::constant;
  std::uint8_t op = 0;
  DType dtype = DType::f32;
  std::int32_t slot = 0;
  float value = 0.0f;
  std::uint64_t seed = 0;
};

struct ElementwiseProgram {
  std::vector<Instr> code;
  std::vector<std::string> input_names;   // tensors read, in slot order
  std::vector<DType> input_types;  // how each input is stored
  std::vector<std::string> output_names;  // statements computed, in slot order
  std::vector<DType> output_types;
  int stack_depth = 0;                    // the most registers the program needs
};

// One statement of a fused element-wise kernel.
struct ElementwiseStmt {
  std::string name;  // the value it defines
  Expr expr;
  DType dtype = DType::f32;
};

// Compiles statements in order into one program. `input_types` gives the
// stored dtype of every tensor the expressions read (outside the statements
// themselves); `scalars` the scalar parameters. Throws UserError for an
// unknown scalar or tensor, InternalError past the limits above.
[[nodiscard]] ElementwiseProgram compile_elementwise(
    const std::vector<ElementwiseStmt>& stmts, const std::map<std::string, DType>& input_types,
    const std::map<std::string, double>& scalars);

// Where element (i, j) of a block lives in an operand's buffer.
struct Access {
  std::int64_t base = 0;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 0;
  [[nodiscard]] COCONET_HD std::int64_t at(std::int64_t i, std::int64_t j) const {
    return base + i * row_stride + j * col_stride;
  }
};

// A rows x cols block of a statement's output, and where it sits in the
// statement's global shape (flattened to [global_rows, global_cols]).
struct Block {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row0 = 0;         // global row of local row 0
  std::int64_t col0 = 0;         // global column of local column 0
  std::int64_t global_cols = 1;  // columns of the global shape
  [[nodiscard]] COCONET_HD std::uint64_t global_index(std::int64_t i, std::int64_t j) const {
    return static_cast<std::uint64_t>((row0 + i) * global_cols + col0 + j);
  }
};

// Rounds an f32 value to the precision of `t` (and back to f32).
COCONET_HD float round_to(DType t, float x) {
  switch (t) {
    case DType::f16: return f16_to_float(float_to_f16(x));
    case DType::bf16: return bf16_to_float(float_to_bf16(x));
    case DType::f32: return x;
  }
  return x;
}

// Evaluates the program at one element. `load(slot)` returns input `slot` at
// this element as f32; outputs land in out[slot] already rounded to their
// dtypes. Used as is by device code; the cpu backend evaluates whole blocks.
template <typename Load>
COCONET_HD void eval_element(const Instr* code, int n, const DType* output_types, Load&& load,
                             std::uint64_t global_index, float* out) {
  float stack[kMaxStack];
  int top = -1;
  for (int pc = 0; pc < n; ++pc) {
    const Instr& in = code[pc];
    switch (in.code) {
      case OpCode::load: stack[++top] = load(in.slot); break;
      case OpCode::load_output: stack[++top] = out[in.slot]; break;
      case OpCode::constant: stack[++top] = in.value; break;
      case OpCode::unary:
        stack[top] = apply_unary(static_cast<UnaryOp>(in.op), stack[top]);
        break;
      case OpCode::binary:
        --top;
        stack[top] =
            apply_binary(static_cast<BinaryOp>(in.op), stack[top], stack[top + 1]);
        break;
      case OpCode::select:
        top -= 2;
        stack[top] = stack[top] != 0.0f ? stack[top + 1] : stack[top + 2];
        break;
      case OpCode::round: stack[top] = round_to(in.dtype, stack[top]); break;
      case OpCode::dropout:
        stack[top] = dropout(stack[top], in.value, in.seed, global_index);
        break;
      case OpCode::store: out[in.slot] = round_to(output_types[in.slot], stack[top--]); break;
    }
  }
}

}  // namespace coconet::model
