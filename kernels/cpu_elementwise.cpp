// Tile-at-a-time interpreter of ElementwiseProgram for the cpu backend.
//
// Design notes
// - A row of the block is processed in tiles (1024 or 4096 elements, by the
//   program: tile_for); each instruction is one loop over the tile, so the
//   dispatch cost is paid once per tile. The operator is dispatched
//   outside its loop (one instantiation of model/ops.h's definition per
//   operator), so the loops vectorise: arithmetic, comparisons, selects
//   and sqrt (the library is built without errno for math and without FP
//   contraction, kernels/cpu.cmake); exp, log, tanh, pow and the dropout
//   hash stay one call per element.
// - Rounding to f16/bf16 (casts, stores) converts whole tiles
//   (kernels/cpu_convert.cpp), with the values of half.h.
// - A block whose operands are all contiguous (or broadcast) across rows is
//   flattened into one long row first, so 1-D tensors (rows x 1 blocks) run
//   as long tiles too.
// - Passes over a tile are what a program costs once its data is in cache,
//   so the engine saves them where the values allow: an f32 output is
//   computed straight into its buffer (no run, no copy; make_plan checks
//   that no later load reads what it overwrites); a product of a run and a
//   scalar is left for the add, subtract, multiply or divide that consumes
//   it, which computes it in its own loop (the same two roundings); a 16-bit
//   input loaded several times is converted once a tile. Adam's three
//   updates (f16 gradient, f32 state) went from 18 passes a tile to 8.
// - A contiguous 16-bit input loaded once, and a 16-bit output, are read
//   and written in place by the add, subtract, multiply or divide, which
//   convert 8 lanes at a time inside their loop (kernels/cpu_half_lanes.h;
//   where the CPU has F16C and AVX2): a 16-bit scaling is one pass, not
//   three (widen, multiply, narrow). A square root is likewise taken inside
//   the loop of the arithmetic that consumes it (Adam's sqrt(v) + eps: 7
//   passes). Those four operations are functions of their own (add_run, ...),
//   which keeps the tile function small enough for GCC to vectorise it.
// - A 16-bit run scaled by a constant (`w + 0.5 * g`) is read by its
//   consumer's loop like an unscaled one; a product or quotient of two runs
//   consumed by the next add or subtract (`0.999 * v + 0.001 * g * g`), and a
//   root plus a constant divided into (`0.001 * m1 / (sqrt(v1) + eps)`), are
//   computed inside that add's or subtract's loop (`pair`): Adam's updates
//   take 4 passes a tile (the gradient's conversion, one an output), the
//   f16 axpy 1. A program of several passes asks for its streams' lines a
//   tile ahead (kAheadChunk).
#include "kernels/cpu_elementwise.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/cpu_clones.h"
#include "kernels/cpu_half_lanes.h"
#include "model/error.h"

namespace coconet::kernels {
namespace {

// Elements per tile, chosen per call (tile_for): 1024 (4 KiB of f32 a run)
// keeps a short program's runs in L1; 4096 pays each instruction's fixed
// cost a tile (dispatch, loop set-up: some 40 cycles, estimated from Adam
// in cache with 256- and 1024-element tiles) over four times as
// many elements. Measured at 16M elements, 2026-12-05, as shares of STREAM's
// triad with 1024 / 4096: Adam's 29 instructions 0.39-0.41 / 0.50-0.51;
// `y = x * 2` in f32 0.78-0.87 / 1.01 and the triad 0.69-0.78 / 0.90-0.93
// (no run kept: they write their outputs directly); but `y = x * 2` in f16
// 0.34-0.76 / 0.35 and bf16 0.41-0.44 / 0.30 (a converted input and an
// output run, 32 KiB of runs at 4096, leave L1).
constexpr std::int64_t kShortTile = 1024;
constexpr std::int64_t kLongTile = 4096;
constexpr std::int64_t kTile = kLongTile;  // the most a tile holds
// A program this long takes the long tile whatever its runs.
constexpr std::size_t kLongProgram = 16;

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
// the pool, or a contiguous f32 input read in place), one scalar (a
// constant, or an operation of constants, applied without filling a run),
// a run times a scalar not yet computed (`scaled`: run[t] * scalar, done
// inside the loop of the add, subtract, multiply or divide that consumes
// it, which saves a pass over the tile; computed into a run for any other
// consumer), or a run of 16-bit elements (`half`, of type `half_type`: a
// contiguous 16-bit input read in place, widened inside the loop of the
// add, subtract, multiply or divide that consumes it, else into a run; or
// a 16-bit output's place, once an operation has written it there), or the
// square root of a run not yet taken (`root`: taken inside the loop of the
// add, subtract, multiply or divide that consumes it, as Adam's
// `sqrt(v) + eps` is; into a run for any other consumer), or a run or
// scaled run multiplied or divided by another run not yet computed (`by`:
// computed inside the loop of the add or subtract that consumes it next, as
// Adam's `0.001 * g * g` and `0.001 * m1 / (sqrt(v1) + eps)` are; into a run
// for any other consumer).
// A 16-bit run may be scaled too (`0.5 * g`): widened and multiplied by
// `scalar` in its consumer's loop.
struct Value {
  const float* run = nullptr;
  float scalar = 0.0f;
  bool scaled = false;
  const std::uint16_t* half = nullptr;
  model::DType half_type = model::DType::f32;
  bool root = false;
  bool plus = false;  // a root plus `scalar`, left for a pair (Adam's sqrt(v) + eps)
  const float* by = nullptr;
  model::BinaryOp by_op = model::BinaryOp::mul;
  bool by_plus = false;  // the pair's right is sqrt(by) + by_scalar
  float by_scalar = 0.0f;
  [[nodiscard]] bool is_scalar() const { return run == nullptr && half == nullptr; }
  // A run or a scalar, read as it is.
  [[nodiscard]] bool plain() const { return !scaled && !root && half == nullptr && by == nullptr; }
  // What the loops read beside a plain operand only: a 16-bit run (scaled
  // or not), a root.
  [[nodiscard]] bool widened() const { return half != nullptr || (root && !plus); }
  [[nodiscard]] bool pair() const { return by != nullptr; }
  // An f32 run times a scalar.
  [[nodiscard]] bool scaled_run() const { return scaled && half == nullptr && by == nullptr; }
};

// The registers of one thread: kMaxStack + kMaxOutputs runs of kTile f32
// (a short tile uses the start of each).
// Stack depth d writes into the run it owns; a store hands that run to the
// output slot and takes the slot's old one (a swap, no copy).
// Each run padded by one cache line so that runs, and the 4 KiB-aligned
// operand buffers, do not sit at the same offset modulo 4 KiB: a store to one
// run then a load from another would alias in the CPU's store-to-load check
// (Intel's optimization manual, "4K aliasing").
constexpr std::int64_t kRunStride = kTile + 16;

struct Registers {
  std::array<std::array<float, kRunStride>, model::kMaxStack + model::kMaxOutputs> pool;
  // Inputs converted to f32 in this tile (16-bit or strided ones), each
  // converted once however often the program loads it.
  std::array<std::array<float, kRunStride>, model::kMaxInputs> converted_pool;
  std::array<bool, model::kMaxInputs> converted{};
  std::array<int, model::kMaxStack> stack_run{};
  std::array<int, model::kMaxOutputs> out_run{};
  std::array<Value, model::kMaxStack> stack{};
  // This tile's place in each output written directly, f32 or 16-bit
  // (nullptr in both: the output goes through its run and store_f32).
  std::array<float*, model::kMaxOutputs> out_direct{};
  std::array<std::uint16_t*, model::kMaxOutputs> out16{};
  Registers() {
    for (int d = 0; d < model::kMaxStack; ++d) stack_run[static_cast<std::size_t>(d)] = d;
    for (int s = 0; s < model::kMaxOutputs; ++s) out_run[static_cast<std::size_t>(s)] = model::kMaxStack + s;
  }
  float* owned(int depth) { return pool[static_cast<std::size_t>(stack_run[static_cast<std::size_t>(depth)])].data(); }
  float* out(std::size_t slot) { return pool[static_cast<std::size_t>(out_run[slot])].data(); }
  // Where output `slot`'s value for this tile is, for a load_output.
  const float* out_value(std::size_t slot) { return out_direct[slot] != nullptr ? out_direct[slot] : out(slot); }
  float* converted_run(std::size_t slot) { return converted_pool[slot].data(); }
  Value& at(int depth) { return stack[static_cast<std::size_t>(depth)]; }
};

// Operand readers the loops are instantiated with: a run, one scalar, or a
// run times a scalar. Multiplication commutes in IEEE arithmetic (NaN
// payloads aside, which need only stay NaN), so s * x and x * s are one kind.
struct Run {
  const float* p;
  float operator[](std::int64_t t) const { return p[t]; }
};
struct Scalar {
  float s;
  float operator[](std::int64_t) const { return s; }
};
struct Scaled {
  const float* p;
  float s;
  float operator[](std::int64_t t) const { return p[t] * s; }
};
// 16-bit elements widened in the loop, kHalfLanes at a time (lanes()), the
// tail an element at a time.
struct Root {
  const float* p;
  float operator[](std::int64_t t) const { return model::apply_unary(model::UnaryOp::sqrt, p[t]); }
};
// The square root of a run plus a scalar.
struct RootPlus {
  const float* p;
  float s;
  float operator[](std::int64_t t) const {
    return model::apply_binary(model::BinaryOp::add, model::apply_unary(model::UnaryOp::sqrt, p[t]), s);
  }
};
// `left` (a run or a scaled run) multiplied or divided by `by` (a run, or a
// root plus a scalar): the roundings of the operations it stands for, in
// their order.
template <model::BinaryOp Op, typename L, typename R>
struct Pair {
  L left;
  R by;
  float operator[](std::int64_t t) const { return model::apply_binary(Op, left[t], by[t]); }
};
// A 16-bit run widened and multiplied by `s` (1 when the program does not
// scale it: x * 1 is x, bit for bit, and a NaN stays NaN), so a scaled
// 16-bit run costs its loop a multiply per lane, not a reader of its own.
struct Bf16In {
  const std::uint16_t* p;
  float s;
  float operator[](std::int64_t t) const { return bf16_value(p[t]) * s; }
  void lanes(std::int64_t t, float* x) const {
    widen_bf16_lanes(p + t, x);
    for (std::int64_t k = 0; k < kHalfLanes; ++k) x[k] *= s;
  }
};
struct F16In {
  const std::uint16_t* p;
  float s;
  float operator[](std::int64_t t) const { return model::f16_to_float(p[t]) * s; }
  void lanes(std::int64_t t, float* x) const {
    widen_f16_lanes(p + t, x);
    for (std::int64_t k = 0; k < kHalfLanes; ++k) x[k] *= s;
  }
};
template <typename T>
constexpr bool in_lanes = std::is_same_v<T, F16In> || std::is_same_v<T, Bf16In>;

template <typename R>
void lanes_of(const R& r, std::int64_t t, float* x) {
  if constexpr (in_lanes<R>) {
    r.lanes(t, x);
  } else {
    for (std::int64_t k = 0; k < kHalfLanes; ++k) x[k] = r[t + k];
  }
}

// Where a loop writes: f32, or narrowed to a 16-bit output's place inside
// the loop (kHalfLanes at a time, the tail an element at a time).
struct F32Out {
  float* p;
  bool ahead = false;  // binary_loop asks for lines a tile ahead
  void put(std::int64_t t, float v) const { p[t] = v; }
};
struct Bf16Out {
  std::uint16_t* p;
  bool ahead = false;
  void put(std::int64_t t, float v) const { p[t] = bf16_bits(v); }
  void lanes(std::int64_t t, const float* x) const { narrow_bf16_lanes(x, p + t); }
};
struct F16Out {
  std::uint16_t* p;
  bool ahead = false;
  void put(std::int64_t t, float v) const { p[t] = model::float_to_f16(v); }
  void lanes(std::int64_t t, const float* x) const { narrow_f16_lanes(x, p + t); }
};

// Where an instruction's result goes: the depth's own run (both null), an
// f32 output's place, or a 16-bit output's place (written by the add,
// subtract, multiply and divide only).
struct Dest {
  float* f32 = nullptr;
  std::uint16_t* half = nullptr;
  model::DType half_type = model::DType::f32;
  bool ahead = false;  // the loop asks for its streams' lines a tile ahead
};

template <model::UnaryOp Op>
void unary_loop(float* d, const float* a, std::int64_t n);
void pair_run(float* d, const Value& v, std::int64_t n);

// The run of `v` for n elements: a scalar filled, a scaled run or a root
// computed, or a 16-bit run widened, into depth's own run.
const float* as_run(Registers& r, int depth, const Value& v, std::int64_t n) {
  float* d = r.owned(depth);
  if (v.pair() || v.plus) {
    pair_run(d, v, n);
    return d;
  }
  if (v.root) {
    unary_loop<model::UnaryOp::sqrt>(d, v.run, n);
    return d;
  }
  if (v.half != nullptr) {
    load_f32(reinterpret_cast<const std::byte*>(v.half), v.half_type, 0, 1, n, d);
    if (v.scaled)
      for (std::int64_t t = 0; t < n; ++t) d[t] *= v.scalar;
    return d;
  }
  if (v.scaled) {
    const Scaled x{v.run, v.scalar};
    for (std::int64_t t = 0; t < n; ++t) d[t] = x[t];
    return d;
  }
  if (!v.is_scalar()) return v.run;
  std::fill_n(d, n, v.scalar);
  return d;
}

// The value at `depth` with a scaled run computed: what every consumer but
// the four arithmetic operations reads.
Value settled(Registers& r, int depth, std::int64_t n) {
  Value& v = r.at(depth);
  if (!v.plain()) v = Value{as_run(r, depth, v, n), 0.0f};
  return v;
}

// `p`, as a value the register allocator holds in a register through the
// loop that follows. The tile function is one flattened function holding
// every loop; GCC 12 spilled the destination pointer there and reloaded it
// from the stack at every vector store (perf annotate: the reload took half
// the samples of `y = x * 2` in f32, which measured 0.73-0.77 of the triad
// instead of 0.94-1.0). An empty asm that may change the pointer gives the
// loop a value of its own, live only there.
template <typename T>
T* in_register(T* p) {
#if defined(__GNUC__) || defined(__clang__)
  asm("" : "+r"(p));
#endif
  return p;
}

// One loop per operator and operand kind, the operator fixed at compile
// time: model/ops.h's definition with its switch folded away, so the loop
// vectorises.
template <model::UnaryOp Op>
void unary_loop(float* d, const float* a, std::int64_t n) {
  d = in_register(d);
  for (std::int64_t t = 0; t < n; ++t) d[t] = model::apply_unary(Op, a[t]);
}

// Software prefetching. A program makes several passes over a tile, each
// reading or writing some of its operands' streams; between two tiles' passes
// over a stream the CPU's prefetcher loses it, and each pass began with its
// reads stalled. So the loops of the add, subtract, multiply and divide (and
// the conversion of a 16-bit input loaded again) ask, chunk by chunk, for
// the same stream's lines one tile ahead (the next tile's, for an operand
// in a buffer; for a register's run, lines already cached, a request that
// costs an instruction). Measured at 16M elements (thread CPU time, best of
// 10, 2026-12-06): Adam 1.57-1.71 ns an element without, 1.32-1.44 with. An
// earlier attempt that fetched the whole next tile at a tile's start
// measured slower.
constexpr std::int64_t kAheadChunk = 64;  // elements between requests: 4 lines of f32
constexpr std::int64_t kLine = 64;        // bytes (x86-64)
// Into every cache level (prefetcht0): Adam at 16M measured 1.32-1.40 ns an
// element with it, 1.47-1.52 with the L2 or L3 hints.
constexpr int kAheadLocality = 3;

// Asks for the lines of the chunk at element `t` of the run at `p` (past the
// end of a buffer at the last tile: a prefetch never faults, and the address
// is computed as an integer, not by pointer arithmetic past the buffer);
// `write`: for writing (an output).
template <typename T>
void ahead_run(const T* p, std::int64_t t, bool write = false) {
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(t) * sizeof(T);
  for (std::uintptr_t k = 0; k < kAheadChunk * sizeof(T); k += kLine) {
    const auto* line = reinterpret_cast<const char*>(at + k);
    if (write) {
      __builtin_prefetch(line, 1, kAheadLocality);
    } else {
      __builtin_prefetch(line, 0, kAheadLocality);
    }
  }
}
inline void ahead(const Run& r, std::int64_t t) { ahead_run(r.p, t); }
inline void ahead(const Scaled& r, std::int64_t t) { ahead_run(r.p, t); }
inline void ahead(const Root& r, std::int64_t t) { ahead_run(r.p, t); }
inline void ahead(const Scalar&, std::int64_t) {}
inline void ahead(const F16In& r, std::int64_t t) { ahead_run(r.p, t); }
inline void ahead(const Bf16In& r, std::int64_t t) { ahead_run(r.p, t); }
inline void ahead(const RootPlus& r, std::int64_t t) { ahead_run(r.p, t); }
template <model::BinaryOp Op, typename L, typename R>
void ahead(const Pair<Op, L, R>& r, std::int64_t t) {
  ahead(r.left, t);
  ahead(r.by, t);
}
inline void ahead(const F32Out& w, std::int64_t t) { ahead_run(w.p, t, true); }
inline void ahead(const F16Out& w, std::int64_t t) { ahead_run(w.p, t, true); }
inline void ahead(const Bf16Out& w, std::int64_t t) { ahead_run(w.p, t, true); }

template <typename T>
constexpr bool writes_lanes = std::is_same_v<T, F16Out> || std::is_same_v<T, Bf16Out>;

// Elements [t, end) of binary_loop. The destination pointer goes through
// in_register here, in the function that holds the loop: taken in the caller
// it did not stay in a register (f32 scaling 0.84 of the triad, 0.99 before).
template <model::BinaryOp Op, typename W, typename A, typename B>
void binary_span(W d, A a, B b, std::int64_t t, std::int64_t end) {
  d.p = in_register(d.p);
  if constexpr (writes_lanes<W> || in_lanes<A> || in_lanes<B>) {
    for (; t + kHalfLanes <= end; t += kHalfLanes) {
      float x[kHalfLanes], y[kHalfLanes];
      lanes_of(a, t, x);
      lanes_of(b, t, y);
      for (std::int64_t k = 0; k < kHalfLanes; ++k) x[k] = model::apply_binary(Op, x[k], y[k]);
      if constexpr (writes_lanes<W>) {
        d.lanes(t, x);
      } else {
        for (std::int64_t k = 0; k < kHalfLanes; ++k) d.put(t + k, x[k]);
      }
    }
  }
  if constexpr (std::is_same_v<W, F32Out>) {
    float* const out = d.p;
    for (; t < end; ++t) out[t] = model::apply_binary(Op, a[t], b[t]);
  } else {
    for (; t < end; ++t) d.put(t, model::apply_binary(Op, a[t], b[t]));
  }
}

// d[t] = a[t] Op b[t] over the tile, in chunks, each chunk first asking for
// its operands' lines one tile ahead (ahead).
template <model::BinaryOp Op, typename W, typename A, typename B>
void binary_loop(W d, A a, B b, std::int64_t n) {
  if (!d.ahead) return binary_span<Op>(d, a, b, 0, n);
  std::int64_t t = 0;
  for (; t + kAheadChunk <= n; t += kAheadChunk) {
    ahead(a, t + n);
    ahead(b, t + n);
    ahead(d, t + n);
    binary_span<Op>(d, a, b, t, t + kAheadChunk);
  }
  binary_span<Op>(d, a, b, t, n);
}

// The operations that read a scaled run or a 16-bit run inside their loop,
// and write a 16-bit output's place.
constexpr bool reads_in_loop(model::BinaryOp op) {
  using B = model::BinaryOp;
  return op == B::add || op == B::sub || op == B::mul || op == B::div;
}
template <model::BinaryOp Op>
constexpr bool reads_scaled = reads_in_loop(Op);

template <model::BinaryOp Op, typename W, typename A>
void binary_then(W d, A a, const Value& b, std::int64_t n) {
  if (b.scaled) return binary_loop<Op>(d, a, Scaled{b.run, b.scalar}, n);
  if (b.is_scalar()) return binary_loop<Op>(d, a, Scalar{b.scalar}, n);
  binary_loop<Op>(d, a, Run{b.run}, n);
}

// One operand a 16-bit run or a root, the other a scalar or an f32 run
// (settle_operands settles anything else first).
template <model::BinaryOp Op, typename W, typename H>
void binary_half(W d, H h, bool half_first, const Value& other, std::int64_t n) {
  if (other.is_scalar()) {
    const Scalar s{other.scalar};
    return half_first ? binary_loop<Op>(d, h, s, n) : binary_loop<Op>(d, s, h, n);
  }
  const Run r{other.run};
  half_first ? binary_loop<Op>(d, h, r, n) : binary_loop<Op>(d, r, h, n);
}

// The add or subtract of a run, a scalar or a scaled run (`other`) and a
// pair. A pair is always the right operand: its consumer is the
// instruction after it (pairs), which pops it from the top.
template <model::BinaryOp Op, typename W, typename P>
void binary_pair(W d, const Value& other, P pr, std::int64_t n) {
  if (other.scaled) return binary_loop<Op>(d, Scaled{other.run, other.scalar}, pr, n);
  if (other.is_scalar()) return binary_loop<Op>(d, Scalar{other.scalar}, pr, n);
  binary_loop<Op>(d, Run{other.run}, pr, n);
}

// Calls `f` with the pair `pv` as its reader.
template <typename F>
void with_pair(const Value& pv, F&& f) {
  using B = model::BinaryOp;
  const auto right = [&](auto left) {
    const auto op = [&](auto by) {
      if (pv.by_op == B::div) return f(Pair<B::div, decltype(left), decltype(by)>{left, by});
      f(Pair<B::mul, decltype(left), decltype(by)>{left, by});
    };
    if (pv.by_plus) return op(RootPlus{pv.by, pv.by_scalar});
    op(Run{pv.by});
  };
  if (pv.scaled) return right(Scaled{pv.run, pv.scalar});
  right(Run{pv.run});
}

template <model::BinaryOp Op, typename W>
void binary_pair_values(W d, const Value& other, const Value& pv, std::int64_t n) {
  with_pair(pv, [&](auto pr) { binary_pair<Op>(d, other, pr, n); });
}

// The operations that read a pair inside their loop (writing f32).
constexpr bool reads_pair(model::BinaryOp op) { return op == model::BinaryOp::add || op == model::BinaryOp::sub; }

template <model::BinaryOp Op, typename W>
void binary_values(W d, const Value& a, const Value& b, std::int64_t n) {
  if constexpr (reads_pair(Op) && std::is_same_v<W, F32Out>) {
    if (b.pair()) return binary_pair_values<Op>(d, a, b, n);
  }
  if constexpr (reads_scaled<Op>) {
    if (a.half != nullptr || b.half != nullptr) {
      const Value& h = a.half != nullptr ? a : b;
      const Value& other = a.half != nullptr ? b : a;
      const float s = h.scaled ? h.scalar : 1.0f;
      if (h.half_type == model::DType::bf16) return binary_half<Op>(d, Bf16In{h.half, s}, a.half != nullptr, other, n);
      return binary_half<Op>(d, F16In{h.half, s}, a.half != nullptr, other, n);
    }
    if (a.root) return binary_half<Op>(d, Root{a.run}, true, b, n);
    if (b.root) return binary_half<Op>(d, Root{b.run}, false, a, n);
    if (a.scaled) return binary_then<Op>(d, Scaled{a.run, a.scalar}, b, n);
    if (b.scaled && a.is_scalar()) return binary_loop<Op>(d, Scalar{a.scalar}, Scaled{b.run, b.scalar}, n);
    if (b.scaled) return binary_loop<Op>(d, Run{a.run}, Scaled{b.run, b.scalar}, n);
  }
  if (a.is_scalar()) return binary_loop<Op>(d, Scalar{a.scalar}, Run{b.run}, n);
  if (b.is_scalar()) return binary_loop<Op>(d, Run{a.run}, Scalar{b.scalar}, n);
  binary_loop<Op>(d, Run{a.run}, Run{b.run}, n);
}

// The add, subtract, multiply or divide into its destination: f32, or a
// 16-bit output's place, narrowed in the loop.
template <model::BinaryOp Op>
void binary_to(const Dest& to, float* run, const Value& a, const Value& b, std::int64_t n) {
  if constexpr (reads_scaled<Op>) {
    if (to.half != nullptr && to.half_type == model::DType::bf16) return binary_values<Op>(Bf16Out{to.half, to.ahead}, a, b, n);
    if (to.half != nullptr) return binary_values<Op>(F16Out{to.half, to.ahead}, a, b, n);
  }
  binary_values<Op>(F32Out{run, to.ahead}, a, b, n);
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

// `d`: an f32 run; `to`: a 16-bit output's place instead, where set.
// The add, subtract, multiply and divide hold most of the loops (a loop for
// every reader and writer kind): each is a function of its own, cloned per
// x86 level. Inlined into the tile function with the rest, they made it
// large enough that GCC 12 left loops scalar there (Adam's `0.9 * m + 0.1 * g`
// ran one element at a time, perf annotate; Adam fell from 0.53 of the triad
// to 0.40-0.43).
COCONET_CPU_CLONES void add_run(const Dest& to, float* d, const Value& a, const Value& b, std::int64_t n) {
  binary_to<model::BinaryOp::add>(to, d, a, b, n);
}
COCONET_CPU_CLONES void sub_run(const Dest& to, float* d, const Value& a, const Value& b, std::int64_t n) {
  binary_to<model::BinaryOp::sub>(to, d, a, b, n);
}
COCONET_CPU_CLONES void mul_run(const Dest& to, float* d, const Value& a, const Value& b, std::int64_t n) {
  binary_to<model::BinaryOp::mul>(to, d, a, b, n);
}
COCONET_CPU_CLONES void div_run(const Dest& to, float* d, const Value& a, const Value& b, std::int64_t n) {
  binary_to<model::BinaryOp::div>(to, d, a, b, n);
}

void binary_run(model::BinaryOp op, const Dest& to, float* d, const Value& a, const Value& b, std::int64_t n) {
  using B = model::BinaryOp;
  switch (op) {
    case B::add: return add_run(to, d, a, b, n);
    case B::sub: return sub_run(to, d, a, b, n);
    case B::mul: return mul_run(to, d, a, b, n);
    case B::div: return div_run(to, d, a, b, n);
    case B::pow: return binary_to<B::pow>(to, d, a, b, n);
    case B::max: return binary_to<B::max>(to, d, a, b, n);
    case B::min: return binary_to<B::min>(to, d, a, b, n);
    case B::lt: return binary_to<B::lt>(to, d, a, b, n);
    case B::le: return binary_to<B::le>(to, d, a, b, n);
    case B::gt: return binary_to<B::gt>(to, d, a, b, n);
    case B::ge: return binary_to<B::ge>(to, d, a, b, n);
    case B::eq: return binary_to<B::eq>(to, d, a, b, n);
    case B::ne: return binary_to<B::ne>(to, d, a, b, n);
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

// A pair, or a root plus a scalar, computed into `d` (for a consumer that
// does not read it in its loop).
void pair_run(float* d, const Value& v, std::int64_t n) {
  using B = model::BinaryOp;
  const F32Out to{d};
  if (v.plus) return binary_loop<B::add>(to, Root{v.run}, Scalar{v.scalar}, n);
  with_pair(v, [&](auto pr) {
    d = in_register(d);
    for (std::int64_t t = 0; t < n; ++t) d[t] = pr[t];
  });
}

// How one call runs the program, decided once from the program and the
// operands: which outputs a later statement reads back, and which f32
// outputs the program writes straight into their buffers (`into[pc]`: the
// output slot instruction pc computes into, -1 for its own run).
struct Plan {
  std::array<bool, model::kMaxOutputs> read_back{};
  std::array<bool, model::kMaxInputs> loaded_again{};  // inputs the program loads more than once
  std::array<bool, model::kMaxOutputs> direct{};
  // Inputs read as 16-bit runs in place (contiguous, loaded once, of a type
  // loops convert).
  std::array<bool, model::kMaxInputs> half_run{};
  std::vector<int> into;
  // Whether the loops ask for their streams' lines a tile ahead: where the
  // program makes several passes over a tile (more than one statement, or
  // more than two computing instructions: at most one of two is left to the
  // other's loop). A single pass streams each operand without a break,
  // which the CPU's prefetcher follows alone (bf16 scaling measured
  // 0.59-0.61 of the triad with the requests, 0.68-0.73 without).
  bool ahead = false;
};

Dest ahead_of(Dest d, const Plan& plan) {
  d.ahead = plan.ahead;
  return d;
}

// Whether `o` is contiguous 16-bit storage that loops read or write in
// place, converting 8 lanes at a time (where the CPU has the instructions:
// kernels/cpu_half_lanes.h).
bool half_in_place(const CpuOperand& o) {
  return o.dtype != model::DType::f32 && o.access.col_stride == 1 && half_lanes();
}

// `h` widened into `d` (a 16-bit input loaded again, converted once a tile),
// its lines asked for a tile ahead as binary_loop's are.
template <typename H>
void widen_loop(float* d, H h, std::int64_t n) {
  std::int64_t t = 0;
  for (; t + kAheadChunk <= n; t += kAheadChunk) {
    ahead(h, t + n);
    for (std::int64_t k = t; k < t + kAheadChunk; k += kHalfLanes) h.lanes(k, d + k);
  }
  for (; t < n; ++t) d[t] = h[t];
}

// Input `op`'s n elements from `first` converted to f32 into `d`.
void convert(const CpuOperand& op, std::int64_t first, std::int64_t n, float* d, bool ahead) {
  const auto* h = reinterpret_cast<const std::uint16_t*>(op.data) + first;
  if (!half_in_place(op) || !ahead) return load_f32(op.data, op.dtype, first, op.access.col_stride, n, d);
  if (op.dtype == model::DType::bf16) return widen_loop(d, Bf16In{h, 1.0f}, n);
  widen_loop(d, F16In{h, 1.0f}, n);
}

// Pushes input `slot` for the tile: read in place when contiguous f32, or
// contiguous 16-bit loaded once (a 16-bit run, widened by its consumer);
// else converted: into the input's own run, once a tile, when loaded
// again; else into depth's own run (one run fewer in L1).
void load(Registers& r, int depth, std::size_t slot, const Plan& plan, const CpuOperand& op, std::int64_t i,
          std::int64_t j0, std::int64_t n) {
  const std::int64_t first = op.access.at(i, j0);
  if (op.dtype == model::DType::f32 && op.access.col_stride == 1) {
    r.at(depth) = Value{reinterpret_cast<const float*>(op.data) + first, 0.0f};
    return;
  }
  if (plan.half_run[slot]) {
    r.at(depth) = Value{nullptr, 0.0f, false, reinterpret_cast<const std::uint16_t*>(op.data) + first, op.dtype};
    return;
  }
  if (op.access.col_stride == 0) {  // broadcast: one value for the whole tile
    float v = 0;
    load_f32(op.data, op.dtype, first, 0, 1, &v);
    r.at(depth) = Value{nullptr, v};
    return;
  }
  const bool again = plan.loaded_again[slot];
  float* d = again ? r.converted_run(slot) : r.owned(depth);
  if (!again || !r.converted[slot]) convert(op, first, n, d, plan.ahead);
  r.converted[slot] = true;
  r.at(depth) = Value{d, 0.0f};
}

// Pops the top into output `slot`. Written directly: the top is the output's
// place already (its producer computed into it), else copied there.
// Through a run: the top's run is handed over when the top owns it, else
// copied; rounded to its dtype where the program reads it back (else
// store_f32 rounds it).
void store(Registers& r, int depth, std::size_t slot, model::DType t, bool read_back, std::int64_t n) {
  if (std::uint16_t* to = r.out16[slot]; to != nullptr) {
    if (r.at(depth).half == to && !r.at(depth).scaled) return;  // its operation wrote it there
    store_f32(reinterpret_cast<std::byte*>(to), t, 0, 1, n, as_run(r, depth, r.at(depth), n));
    return;
  }
  const Value v = settled(r, depth, n);
  if (float* to = r.out_direct[slot]; to != nullptr) {
    if (v.run != to) std::copy_n(as_run(r, depth, v, n), n, to);
    return;
  }
  float* own = r.owned(depth);
  if (v.run == own) {
    std::swap(r.stack_run[static_cast<std::size_t>(depth)], r.out_run[slot]);
  } else {
    const float* src = as_run(r, depth, v, n);
    std::copy_n(src, n, r.out(slot));
  }
  if (read_back) round_f32(t, n, r.out(slot));
}

// Whether a product of a run and a scalar is left as a scaled run: the run
// must outlive the depth above (a run computed there is overwritten by the
// next push). A 16-bit run (in place: nothing overwrites it) is scaled too.
bool defers(model::BinaryOp op, const Value& a, const Value& c, const float* above) {
  if (op != model::BinaryOp::mul || a.is_scalar() == c.is_scalar()) return false;
  const Value& v = a.is_scalar() ? c : a;
  if (v.half != nullptr && !v.scaled) return true;
  return v.plain() && v.run != above;
}

// The scaled run of `defers`.
Value scaled_value(const Value& a, const Value& c) {
  Value v = a.is_scalar() ? c : a;
  v.scalar = a.is_scalar() ? a.scalar : c.scalar;
  v.scaled = true;
  return v;
}

bool next_is(const model::Instr* next, bool (*op)(model::BinaryOp)) {
  return next != nullptr && next->code == model::OpCode::binary && op(static_cast<model::BinaryOp>(next->op));
}
bool mul_or_div(model::BinaryOp op) { return op == model::BinaryOp::mul || op == model::BinaryOp::div; }

// Whether a multiply or divide is left as a pair for `next`, the add or
// subtract that consumes it: its left a run or a scaled f32 run, its right
// a run or a root plus a scalar (a product's operands taken in either
// order: x * y is y * x, bit for bit). Its consumer being the next
// instruction, nothing overwrites the runs it reads in between.
bool pairs(model::BinaryOp op, const Value& a, const Value& c, const model::Instr* next) {
  if (!next_is(next, reads_pair) || !mul_or_div(op)) return false;
  const auto run = [](const Value& v) { return v.plain() && !v.is_scalar(); };
  if ((run(c) || c.plus) && (run(a) || a.scaled_run())) return true;
  return op == model::BinaryOp::mul && run(a) && c.scaled_run();
}

// The pair of `pairs`, its scaled run on the left.
Value pair_value(model::BinaryOp op, const Value& a, const Value& c) {
  const bool swap = c.scaled_run();
  const Value& right = swap ? a : c;
  Value v = swap ? c : a;
  v.by = right.run;
  v.by_op = op;
  v.by_plus = right.plus;
  v.by_scalar = right.scalar;
  return v;
}

// Whether a root plus a scalar (an add of the two) is left for `next`, a
// multiply or divide that may make it a pair's right (else it is computed
// into a run there, the pass it would have taken here).
bool adds_to_root(model::BinaryOp op, const Value& a, const Value& c, const model::Instr* next) {
  if (op != model::BinaryOp::add || !next_is(next, mul_or_div)) return false;
  const auto root = [](const Value& v) { return v.root && !v.plus; };
  return (root(a) && c.is_scalar()) || (root(c) && a.is_scalar());
}

// The value of adds_to_root (x + y is y + x, bit for bit).
Value root_plus(const Value& a, const Value& c) {
  Value v = a.root ? a : c;
  v.plus = true;
  v.scalar = a.root ? c.scalar : a.scalar;
  return v;
}

// Makes the operands of a binary operation at `top` and `top + 1` what its
// loop reads: f32 runs and scalars for most; the add, subtract, multiply
// and divide also read scaled runs, or one 16-bit run (scaled or not) or
// root with a scalar or an f32 run beside it; the add and subtract into
// f32 (`f32_dest`) also one pair with a scalar, an f32 run or a scaled run
// beside it.
void settle_operands(Registers& r, model::BinaryOp op, bool f32_dest, int top, std::int64_t n) {
  if (!reads_in_loop(op)) {
    settled(r, top, n);
    settled(r, top + 1, n);
    return;
  }
  // A root plus a scalar is read in a pair only (made before settling); a
  // pair is never the left operand (its consumer pops it from the top).
  for (const int d : {top, top + 1})
    if (r.at(d).plus) settled(r, d, n);
  if (r.at(top).pair()) settled(r, top, n);
  if (r.at(top + 1).pair() && (!reads_pair(op) || !f32_dest)) settled(r, top + 1, n);
  const Value a = r.at(top), c = r.at(top + 1);
  if (a.widened() && !c.plain()) {
    settled(r, top + 1, n);
  } else if (c.widened() && !a.plain()) {
    settled(r, top, n);
  } else if (c.pair() && !(a.plain() || a.scaled_run())) {
    settled(r, top, n);
  }
}

// One instruction over the tile. `into`: where a computed result goes (the
// depth's own run, or an output's place when the next instruction stores it
// there; a 16-bit place only for a binary operation that writes one).
// `next`: the instruction after it (nullptr at the end).
void run_instr(const model::ElementwiseProgram& p, const Plan& plan, std::span<const CpuOperand> ins,
               const model::Block& b, std::int64_t i, std::int64_t j0, std::int64_t n, const model::Instr& in,
               const model::Instr* next, const Dest& into, int& top, Registers& r) {
  // The result's run at depth d: the output's place, else the depth's own.
  const auto to = [&](int d) { return into.f32 != nullptr ? into.f32 : r.owned(d); };
  switch (in.code) {
    case model::OpCode::load: {
      const auto slot = static_cast<std::size_t>(in.slot);
      return load(r, ++top, slot, plan, ins[slot], i, j0, n);
    }
    case model::OpCode::load_output:
      r.at(++top) = Value{r.out_value(static_cast<std::size_t>(in.slot)), 0.0f};
      return;
    case model::OpCode::constant: r.at(++top) = Value{nullptr, in.value}; return;
    case model::OpCode::unary: {
      const Value a = settled(r, top, n);
      const auto op = static_cast<model::UnaryOp>(in.op);
      if (op == model::UnaryOp::sqrt && !a.is_scalar() && into.f32 == nullptr) {
        r.at(top) = Value{a.run, 0.0f, false, nullptr, model::DType::f32, true};  // taken by its consumer
      } else if (a.is_scalar()) {
        r.at(top) = Value{nullptr, model::apply_unary(op, a.scalar)};
      } else {
        unary_run(op, to(top), a.run, n);
        r.at(top) = Value{to(top), 0.0f};
      }
      return;
    }
    case model::OpCode::binary: {
      --top;
      const auto op = static_cast<model::BinaryOp>(in.op);
      const bool in_own_run = into.f32 == nullptr && into.half == nullptr;
      if (in_own_run && pairs(op, r.at(top), r.at(top + 1), next)) {
        r.at(top) = pair_value(op, r.at(top), r.at(top + 1));
        return;
      }
      settle_operands(r, op, into.half == nullptr, top, n);
      const Value a = r.at(top), c = r.at(top + 1);
      if (a.is_scalar() && c.is_scalar()) {
        r.at(top) = Value{nullptr, model::apply_binary(op, a.scalar, c.scalar)};
      } else if (in_own_run && defers(op, a, c, r.owned(top + 1))) {
        r.at(top) = scaled_value(a, c);
      } else if (in_own_run && adds_to_root(op, a, c, next)) {
        r.at(top) = root_plus(a, c);
      } else if (into.half != nullptr) {
        binary_run(op, ahead_of(into, plan), nullptr, a, c, n);
        r.at(top) = Value{nullptr, 0.0f, false, into.half, into.half_type};
      } else {
        binary_run(op, ahead_of(Dest{}, plan), to(top), a, c, n);
        r.at(top) = Value{to(top), 0.0f};
      }
      return;
    }
    case model::OpCode::select: {
      top -= 2;
      const float* c = as_run(r, top, r.at(top), n);
      const float* a = as_run(r, top + 1, r.at(top + 1), n);
      const float* e = as_run(r, top + 2, r.at(top + 2), n);
      select_run(to(top), c, a, e, n);
      r.at(top) = Value{to(top), 0.0f};
      return;
    }
    case model::OpCode::round: {
      const Value a = settled(r, top, n);
      if (a.is_scalar()) {
        r.at(top) = Value{nullptr, model::round_to(in.dtype, a.scalar)};
        return;
      }
      float* d = to(top);
      if (a.run != d) std::copy_n(a.run, n, d);
      round_f32(in.dtype, n, d);
      r.at(top) = Value{d, 0.0f};
      return;
    }
    case model::OpCode::dropout: {
      const float* a = as_run(r, top, r.at(top), n);
      dropout_run(in, b, i, j0, to(top), a, n);
      r.at(top) = Value{to(top), 0.0f};
      return;
    }
    case model::OpCode::store: {
      const auto slot = static_cast<std::size_t>(in.slot);
      store(r, top--, slot, p.output_types[slot], plan.read_back[slot], n);
      return;
    }
  }
}

// One tile through the program, then its outputs stored: the unit of work,
// cloned per x86 level with every loop inside (kernels/cpu_clones.h).
COCONET_CPU_CLONES void run_tile(const model::ElementwiseProgram& p, const Plan& plan, std::span<const CpuOperand> ins,
                                 std::span<const CpuOperand> outs, const model::Block& b, std::int64_t i,
                                 std::int64_t j0, std::int64_t n, Registers& r) {
  r.converted.fill(false);
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const bool f32 = outs[k].dtype == model::DType::f32;
    const std::int64_t at = outs[k].access.at(i, j0);
    r.out_direct[k] = plan.direct[k] && f32 ? reinterpret_cast<float*>(outs[k].data) + at : nullptr;
    r.out16[k] = plan.direct[k] && !f32 ? reinterpret_cast<std::uint16_t*>(outs[k].data) + at : nullptr;
  }
  int top = -1;
  for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
    const int slot = plan.into[pc];
    Dest into;
    if (slot >= 0) {
      const auto k = static_cast<std::size_t>(slot);
      into = Dest{r.out_direct[k], r.out16[k], outs[k].dtype};
    }
    const model::Instr* next = pc + 1 < p.code.size() ? &p.code[pc + 1] : nullptr;
    run_instr(p, plan, ins, b, i, j0, n, p.code[pc], next, into, top, r);
  }
  for (std::size_t k = 0; k < outs.size(); ++k)
    if (!plan.direct[k])
      store_f32(outs[k].data, outs[k].dtype, outs[k].access.at(i, j0), outs[k].access.col_stride, n, r.out(k));
}

// The bytes an operand covers over the block, [lo, hi).
struct ByteRange {
  std::uintptr_t lo = 0, hi = 0;
  [[nodiscard]] bool overlaps(const ByteRange& o) const { return lo < o.hi && o.lo < hi; }
};

ByteRange bytes_of(const CpuOperand& o, const model::Block& b) {
  const auto base = reinterpret_cast<std::uintptr_t>(o.data);
  const auto size = static_cast<std::int64_t>(model::bytes_of(o.dtype));
  std::int64_t lo = o.access.at(0, 0), hi = lo;
  for (std::int64_t corner : {o.access.at(0, b.cols - 1), o.access.at(b.rows - 1, 0), o.access.at(b.rows - 1, b.cols - 1)}) {
    lo = std::min(lo, corner);
    hi = std::max(hi, corner);
  }
  return {base + static_cast<std::uintptr_t>(lo * size), base + static_cast<std::uintptr_t>((hi + 1) * size)};
}

bool same_elements(const CpuOperand& a, const CpuOperand& o) {
  return a.data == o.data && a.dtype == o.dtype && a.access.base == o.access.base &&
         a.access.row_stride == o.access.row_stride && a.access.col_stride == o.access.col_stride;
}

// Whether the store at `pc` may write output `out` in place of a run: what
// it writes is never read again as an input, except element for element by
// loads before it (an update in place: each element read, then written).
bool may_write_directly(const model::ElementwiseProgram& p, std::size_t pc, const CpuOperand& out,
                        std::span<const CpuOperand> ins, const model::Block& b) {
  if (!(out.dtype == model::DType::f32 && out.access.col_stride == 1) && !half_in_place(out)) return false;
  const ByteRange written = bytes_of(out, b);
  for (std::size_t k = 0; k < p.code.size(); ++k) {
    if (p.code[k].code != model::OpCode::load) continue;
    const CpuOperand& in = ins[static_cast<std::size_t>(p.code[k].slot)];
    if (!written.overlaps(bytes_of(in, b))) continue;
    if (k > pc || !same_elements(in, out)) return false;
  }
  return true;
}

bool computes(model::OpCode c) {
  using C = model::OpCode;
  return c == C::unary || c == C::binary || c == C::select || c == C::round || c == C::dropout;
}

// The stack's depth after each instruction (-1 when empty).
int depth_after(const model::Instr& in, int top) {
  using C = model::OpCode;
  switch (in.code) {
    case C::load:
    case C::load_output:
    case C::constant: return top + 1;
    case C::binary:
    case C::store: return top - 1;
    case C::select: return top - 2;
    default: return top;
  }
}

// Whether the instruction before a store to a 16-bit output writes that
// output's place itself: the add, subtract, multiply and divide do.
bool writes_half(const model::Instr& in) {
  return in.code == model::OpCode::binary && reads_in_loop(static_cast<model::BinaryOp>(in.op));
}

// Decides the plan. An output is written directly where each of its stores
// empties the stack (no loaded value outlives the write) and the buffers
// allow it; a 16-bit one only where no later statement reads it back (a
// read-back reads f32).
// Fills `plan` (reused across calls: no allocation once its vector has grown).
void make_plan(Plan& plan, const model::ElementwiseProgram& p, std::span<const CpuOperand> ins, std::span<const CpuOperand> outs,
               const model::Block& b) {
  plan.read_back.fill(false);
  plan.loaded_again.fill(false);
  plan.direct.fill(false);
  plan.half_run.fill(false);
  plan.into.assign(p.code.size(), -1);
  for (std::size_t k = 0; k < outs.size(); ++k) plan.direct[k] = true;
  std::array<bool, model::kMaxInputs> seen{};
  int top = -1;
  for (std::size_t pc = 0; pc < p.code.size(); ++pc) {
    const model::Instr& in = p.code[pc];
    top = depth_after(in, top);
    const auto slot = static_cast<std::size_t>(in.slot);
    if (in.code == model::OpCode::load_output) plan.read_back[slot] = true;
    if (in.code == model::OpCode::load) {
      plan.loaded_again[slot] = plan.loaded_again[slot] || seen[slot];
      seen[slot] = true;
    }
    if (in.code == model::OpCode::store)
      plan.direct[slot] = plan.direct[slot] && top == -1 && may_write_directly(p, pc, outs[slot], ins, b);
  }
  for (std::size_t k = 0; k < ins.size(); ++k) plan.half_run[k] = !plan.loaded_again[k] && half_in_place(ins[k]);
  const auto computing = std::count_if(p.code.begin(), p.code.end(), [](const model::Instr& in) { return computes(in.code); });
  plan.ahead = outs.size() > 1 || computing > 2;
  for (std::size_t k = 0; k < outs.size(); ++k)
    if (outs[k].dtype != model::DType::f32) plan.direct[k] = plan.direct[k] && !plan.read_back[k];
  for (std::size_t pc = 1; pc < p.code.size(); ++pc) {
    const model::Instr& in = p.code[pc];
    if (in.code != model::OpCode::store) continue;
    const auto slot = static_cast<std::size_t>(in.slot);
    const bool f32 = outs[slot].dtype == model::DType::f32;
    if (plan.direct[slot] && (f32 ? computes(p.code[pc - 1].code) : writes_half(p.code[pc - 1]))) plan.into[pc - 1] = in.slot;
  }
}

// The tile for a call (see kShortTile): long for a long program, or for one
// whose operands are all read and written in place (f32, or 16-bit that
// loops convert: no conversion runs, no output runs); short otherwise.
std::int64_t tile_for(const model::ElementwiseProgram& p, std::span<const CpuOperand> ins,
                      std::span<const CpuOperand> outs) {
  if (p.code.size() >= kLongProgram) return kLongTile;
  const auto in_place = [](const CpuOperand& o) {
    return (o.dtype == model::DType::f32 && (o.access.col_stride == 1 || o.access.col_stride == 0)) || half_in_place(o);
  };
  return std::all_of(ins.begin(), ins.end(), in_place) && std::all_of(outs.begin(), outs.end(), in_place) ? kLongTile
                                                                                                          : kShortTile;
}

}  // namespace

void cpu_elementwise(const model::ElementwiseProgram& program, std::span<const CpuOperand> inputs,
                     std::span<const CpuOperand> outputs, const model::Block& block) {
  COCONET_ASSERT(inputs.size() == program.input_types.size(), "element-wise input count mismatch");
  COCONET_ASSERT(outputs.size() == program.output_types.size(), "element-wise output count mismatch");
  std::vector<CpuOperand> ins(inputs.begin(), inputs.end());
  std::vector<CpuOperand> outs(outputs.begin(), outputs.end());
  const model::Block b = flatten(block, ins, outs);
  if (b.rows <= 0 || b.cols <= 0) return;
  thread_local Plan plan;
  make_plan(plan, program, ins, outs, b);
  // Per thread (the cpu backend also runs programs on its communication
  // thread), allocated once: no allocation per call.
  thread_local const auto regs = std::make_unique<Registers>();
  const std::int64_t tile = tile_for(program, ins, outs);
  for (std::int64_t i = 0; i < b.rows; ++i) {
    for (std::int64_t j0 = 0; j0 < b.cols; j0 += tile) {
      const std::int64_t n = std::min(tile, b.cols - j0);
      run_tile(program, plan, ins, outs, b, i, j0, n, *regs);
    }
  }
}

}  // namespace coconet::kernels
