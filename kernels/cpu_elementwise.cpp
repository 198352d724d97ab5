// Tile-at-a-time interpreter of ElementwiseProgram for the cpu backend.
//
// Design notes
// - A row of the block is processed in tiles of kTile elements; each
//   instruction is one loop over the tile, so the dispatch cost is paid once
//   per tile. The operator is dispatched outside its loop (one instantiation
//   of model/ops.h's definition per operator), so the loops vectorise:
//   arithmetic, comparisons, selects and sqrt (the library is built without
//   errno for math and without FP contraction, kernels/cpu.cmake); exp, log,
//   tanh, pow and the dropout hash stay one call per element.
// - Rounding to f16/bf16 (casts, stores) converts whole tiles
//   (kernels/cpu_convert.cpp), with the values of half.h.
// - A block whose operands are all contiguous (or broadcast) across rows is
//   flattened into one long row first, so 1-D tensors (rows x 1 blocks) run
//   as long tiles too.
#include "kernels/cpu_elementwise.h"

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "kernels/cpu_clones.h"
#include "model/error.h"

namespace coconet::kernels {
namespace {

// Elements per tile: 4 KiB of f32 per register, so a short program's runs
// stay in L1 and L2, long enough that each operand streams 4 KiB at a time
// (measured at 16M elements: a triad as a program at 0.41 of STREAM's triad
// with 256, 0.71 with 1024, 0.51 with 4096).
constexpr std::int64_t kTile = 1024;

bool flattenable(const model::Access& a, std::int64_t cols) { return a.row_stride == cols * a.col_stride; }

// The block as one row when every operand allows it.
model::Block flatten(const model::Block& b, std::span<CpuOperand> ins, std::span<CpuOperand> outs) {
  if (b.rows <= 1 || b.col0 != 0 || b.global_cols != b.cols) return b;
  for (const auto& o : ins)
    if (!flattenable(o.access, b.cols)) return b;
  for (const auto& o : outs)
    if (!flattenable(o.access, b.cols)) return b;
  for (auto& o : ins) o.access.row_stride = 0;
  for (auto& o : outs) o.access.row_stride = 0;
  model::Block flat = b;
  flat.rows = 1;
  flat.cols = b.rows * b.cols;
  flat.col0 = b.row0 * b.global_cols;
  flat.row0 = 0;
  flat.global_cols = flat.cols;
  return flat;
}

// A value on the program's stack, for one tile: a run of f32 (a register of
// the pool, or a contiguous f32 input read in place) or one scalar (a
// constant, or an operation of constants, applied without filling a run).
struct Value {
  const float* run = nullptr;
  float scalar = 0.0f;
  [[nodiscard]] bool is_scalar() const { return run == nullptr; }
};

// The registers of one thread: kMaxStack + kMaxOutputs runs of kTile f32.
// Stack depth d writes into the run it owns; a store hands that run to the
// output slot and takes the slot's old one (a swap, no copy).
// Each run padded by one cache line so that runs, and the 4 KiB-aligned
// operand buffers, do not sit at the same offset modulo 4 KiB: a store to one
// run then a load from another would alias in the CPU's store-to-load check
// (Intel's optimization manual, "4K aliasing").
constexpr std::int64_t kRunStride = kTile + 16;

struct Registers {
  std::array<std::array<float, kRunStride>, model::kMaxStack + model::kMaxOutputs> pool;
  std::array<int, model::kMaxStack> stack_run{};
  std::array<int, model::kMaxOutputs> out_run{};
  std::array<Value, model::kMaxStack> stack{};
  std::array<bool, model::kMaxOutputs> read_back{};  // of the program running: outputs it loads again
  Registers() {
    for (int d = 0; d < model::kMaxStack; ++d) stack_run[static_cast<std::size_t>(d)] = d;
    for (int s = 0; s < model::kMaxOutputs; ++s) out_run[static_cast<std::size_t>(s)] = model::kMaxStack + s;
  }
  float* owned(int depth) { return pool[static_cast<std::size_t>(stack_run[static_cast<std::size_t>(depth)])].data(); }
  float* out(std::size_t slot) { return pool[static_cast<std::size_t>(out_run[slot])].data(); }
  Value& at(int depth) { return stack[static_cast<std::size_t>(depth)]; }
};

// The run of `v` for n elements, a scalar filled into depth's own run.
const float* as_run(Registers& r, int depth, const Value& v, std::int64_t n) {
  if (!v.is_scalar()) return v.run;
  float* d = r.owned(depth);
  std::fill_n(d, n, v.scalar);
  return d;
}

// Operand readers the loops are instantiated with: a run, or one scalar.
struct Run {
  const float* p;
  float operator[](std::int64_t t) const { return p[t]; }
};
struct Scalar {
  float s;
  float operator[](std::int64_t) const { return s; }
};

// One loop per operator and operand kind, the operator fixed at compile
// time: model/ops.h's definition with its switch folded away, so the loop
// vectorises.
template <model::UnaryOp Op>
void unary_loop(float* d, const float* a, std::int64_t n) {
  for (std::int64_t t = 0; t < n; ++t) d[t] = model::apply_unary(Op, a[t]);
}

template <model::BinaryOp Op, typename A, typename B>
void binary_loop(float* d, A a, B b, std::int64_t n) {
  for (std::int64_t t = 0; t < n; ++t) d[t] = model::apply_binary(Op, a[t], b[t]);
}

template <model::BinaryOp Op>
void binary_values(float* d, const Value& a, const Value& b, std::int64_t n) {
  if (a.is_scalar()) return binary_loop<Op>(d, Scalar{a.scalar}, Run{b.run}, n);
  if (b.is_scalar()) return binary_loop<Op>(d, Run{a.run}, Scalar{b.scalar}, n);
  binary_loop<Op>(d, Run{a.run}, Run{b.run}, n);
}

void unary_run(model::UnaryOp op, float* d, const float* a, std::int64_t n) {
  using U = model::UnaryOp;
  switch (op) {
    case U::neg: return unary_loop<U::neg>(d, a, n);
    case U::sqrt: return unary_loop<U::sqrt>(d, a, n);
    case U::rsqrt: return unary_loop<U::rsqrt>(d, a, n);
    case U::abs: return unary_loop<U::abs>(d, a, n);
    case U::exp: return unary_loop<U::exp>(d, a, n);
    case U::log: return unary_loop<U::log>(d, a, n);
    case U::tanh: return unary_loop<U::tanh>(d, a, n);
    case U::gelu: return unary_loop<U::gelu>(d, a, n);
  }
  COCONET_ASSERT(false, "unknown unary operator");
}

void binary_run(model::BinaryOp op, float* d, const Value& a, const Value& b, std::int64_t n) {
  using B = model::BinaryOp;
  switch (op) {
    case B::add: return binary_values<B::add>(d, a, b, n);
    case B::sub: return binary_values<B::sub>(d, a, b, n);
    case B::mul: return binary_values<B::mul>(d, a, b, n);
    case B::div: return binary_values<B::div>(d, a, b, n);
    case B::pow: return binary_values<B::pow>(d, a, b, n);
    case B::max: return binary_values<B::max>(d, a, b, n);
    case B::min: return binary_values<B::min>(d, a, b, n);
    case B::lt: return binary_values<B::lt>(d, a, b, n);
    case B::le: return binary_values<B::le>(d, a, b, n);
    case B::gt: return binary_values<B::gt>(d, a, b, n);
    case B::ge: return binary_values<B::ge>(d, a, b, n);
    case B::eq: return binary_values<B::eq>(d, a, b, n);
    case B::ne: return binary_values<B::ne>(d, a, b, n);
  }
  COCONET_ASSERT(false, "unknown binary operator");
}

void select_run(float* d, const float* c, const float* a, const float* e, std::int64_t n) {
  for (std::int64_t t = 0; t < n; ++t) d[t] = c[t] != 0.0f ? a[t] : e[t];
}

void dropout_run(const model::Instr& in, const model::Block& b, std::int64_t i, std::int64_t j0, float* d, const float* a,
                 std::int64_t n) {
  for (std::int64_t t = 0; t < n; ++t) d[t] = model::dropout(a[t], in.value, in.seed, b.global_index(i, j0 + t));
}

// Pushes input `op` for the tile: read in place when contiguous f32, else
// converted into the depth's own run.
void load(Registers& r, int depth, const CpuOperand& op, std::int64_t i, std::int64_t j0, std::int64_t n) {
  const std::int64_t first = op.access.at(i, j0);
  if (op.dtype == model::DType::f32 && op.access.col_stride == 1) {
    r.at(depth) = Value{reinterpret_cast<const float*>(op.data) + first, 0.0f};
    return;
  }
  if (op.access.col_stride == 0) {  // broadcast: one value for the whole tile
    float v = 0;
    load_f32(op.data, op.dtype, first, 0, 1, &v);
    r.at(depth) = Value{nullptr, v};
    return;
  }
  float* d = r.owned(depth);
  load_f32(op.data, op.dtype, first, op.access.col_stride, n, d);
  r.at(depth) = Value{d, 0.0f};
}

// Pops the top into output `slot`, rounded to its dtype where the program
// reads it back: the top's run is handed over when the top owns it, else copied.
void store(Registers& r, int depth, std::size_t slot, model::DType t, bool read_back, std::int64_t n) {
  const Value v = r.at(depth);
  float* own = r.owned(depth);
  if (v.run == own) {
    std::swap(r.stack_run[static_cast<std::size_t>(depth)], r.out_run[slot]);
  } else {
    const float* src = as_run(r, depth, v, n);
    std::copy_n(src, n, r.out(slot));
  }
  // A later statement reads the stored value; else store_f32 rounds it.
  if (read_back) round_f32(t, n, r.out(slot));
}

void run_instr(const model::ElementwiseProgram& p, std::span<const CpuOperand> ins, const model::Block& b, std::int64_t i,
               std::int64_t j0, std::int64_t n, const model::Instr& in, int& top, Registers& r) {
  switch (in.code) {
    case model::OpCode::load: return load(r, ++top, ins[static_cast<std::size_t>(in.slot)], i, j0, n);
    case model::OpCode::load_output:
      r.at(++top) = Value{r.out(static_cast<std::size_t>(in.slot)), 0.0f};
      return;
    case model::OpCode::constant: r.at(++top) = Value{nullptr, in.value}; return;
    case model::OpCode::unary: {
      const Value a = r.at(top);
      const auto op = static_cast<model::UnaryOp>(in.op);
      if (a.is_scalar()) {
        r.at(top) = Value{nullptr, model::apply_unary(op, a.scalar)};
      } else {
        unary_run(op, r.owned(top), a.run, n);
        r.at(top) = Value{r.owned(top), 0.0f};
      }
      return;
    }
    case model::OpCode::binary: {
      --top;
      const Value a = r.at(top), c = r.at(top + 1);
      const auto op = static_cast<model::BinaryOp>(in.op);
      if (a.is_scalar() && c.is_scalar()) {
        r.at(top) = Value{nullptr, model::apply_binary(op, a.scalar, c.scalar)};
      } else {
        binary_run(op, r.owned(top), a, c, n);
        r.at(top) = Value{r.owned(top), 0.0f};
      }
      return;
    }
    case model::OpCode::select: {
      top -= 2;
      const float* c = as_run(r, top, r.at(top), n);
      const float* a = as_run(r, top + 1, r.at(top + 1), n);
      const float* e = as_run(r, top + 2, r.at(top + 2), n);
      select_run(r.owned(top), c, a, e, n);
      r.at(top) = Value{r.owned(top), 0.0f};
      return;
    }
    case model::OpCode::round: {
      const Value a = r.at(top);
      if (a.is_scalar()) {
        r.at(top) = Value{nullptr, model::round_to(in.dtype, a.scalar)};
        return;
      }
      float* d = r.owned(top);
      if (a.run != d) std::copy_n(a.run, n, d);
      round_f32(in.dtype, n, d);
      r.at(top) = Value{d, 0.0f};
      return;
    }
    case model::OpCode::dropout: {
      const float* a = as_run(r, top, r.at(top), n);
      dropout_run(in, b, i, j0, r.owned(top), a, n);
      r.at(top) = Value{r.owned(top), 0.0f};
      return;
    }
    case model::OpCode::store: {
      const auto slot = static_cast<std::size_t>(in.slot);
      store(r, top--, slot, p.output_types[slot], r.read_back[slot], n);
      return;
    }
  }
}

// One tile through the program, then its outputs stored: the unit of work,
// cloned per x86 level with every loop inside (kernels/cpu_clones.h).
COCONET_CPU_CLONES void run_tile(const model::ElementwiseProgram& p, std::span<const CpuOperand> ins,
                                 std::span<const CpuOperand> outs, const model::Block& b, std::int64_t i,
                                 std::int64_t j0, std::int64_t n, Registers& r) {
  int top = -1;
  for (const model::Instr& in : p.code) run_instr(p, ins, b, i, j0, n, in, top, r);
  for (std::size_t k = 0; k < outs.size(); ++k)
    store_f32(outs[k].data, outs[k].dtype, outs[k].access.at(i, j0), outs[k].access.col_stride, n, r.out(k));
}

}  // namespace

void cpu_elementwise(const model::ElementwiseProgram& program, std::span<const CpuOperand> inputs,
                     std::span<const CpuOperand> outputs, const model::Block& block) {
  COCONET_ASSERT(inputs.size() == program.input_types.size(), "element-wise input count mismatch");
  COCONET_ASSERT(outputs.size() == program.output_types.size(), "element-wise output count mismatch");
  std::vector<CpuOperand> ins(inputs.begin(), inputs.end());
  std::vector<CpuOperand> outs(outputs.begin(), outputs.end());
  const model::Block b = flatten(block, ins, outs);
  // Per thread (the cpu backend also runs programs on its communication
  // thread), allocated once: no allocation per call.
  thread_local const auto regs = std::make_unique<Registers>();
  regs->read_back.fill(false);
  for (const model::Instr& in : program.code)
    if (in.code == model::OpCode::load_output) regs->read_back[static_cast<std::size_t>(in.slot)] = true;
  for (std::int64_t i = 0; i < b.rows; ++i) {
    for (std::int64_t j0 = 0; j0 < b.cols; j0 += kTile) {
      const std::int64_t n = std::min(kTile, b.cols - j0);
      run_tile(program, ins, outs, b, i, j0, n, *regs);
    }
  }
}

}  // namespace coconet::kernels
