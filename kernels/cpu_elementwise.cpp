// Tile-at-a-time interpreter of ElementwiseProgram for the cpu backend.
//
// Design notes
// - A row of the block is processed in tiles of kTile elements; each
//   instruction is one loop over the tile, so the dispatch cost is paid once
//   per tile and the loops vectorise.
// - A block whose operands are all contiguous (or broadcast) across rows is
//   flattened into one long row first, so 1-D tensors (rows x 1 blocks) run
//   as long tiles too.
#include "kernels/cpu_elementwise.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "model/error.h"

namespace coconet::kernels {
namespace {

// Elements per tile: 1 KiB of f32 per register, small enough for L1 with a
// full stack (kMaxStack registers), long enough to amortise dispatch.
constexpr std::int64_t kTile = 256;

template <typename T>
const T* typed(const std::byte* p) {
  return reinterpret_cast<const T*>(p);
}
template <typename T>
T* typed(std::byte* p) {
  return reinterpret_cast<T*>(p);
}

bool flattenable(const Access& a, std::int64_t cols) { return a.row_stride == cols * a.col_stride; }

// The block as one row when every operand allows it.
Block flatten(const Block& b, std::span<CpuOperand> ins, std::span<CpuOperand> outs) {
  if (b.rows <= 1 || b.col0 != 0 || b.global_cols != b.cols) return b;
  for (const auto& o : ins)
    if (!flattenable(o.access, b.cols)) return b;
  for (const auto& o : outs)
    if (!flattenable(o.access, b.cols)) return b;
  for (auto& o : ins) o.access.row_stride = 0;
  for (auto& o : outs) o.access.row_stride = 0;
  Block flat = b;
  flat.rows = 1;
  flat.cols = b.rows * b.cols;
  flat.col0 = b.row0 * b.global_cols;
  flat.row0 = 0;
  flat.global_cols = flat.cols;
  return flat;
}

struct Registers {
  std::array<std::array<float, kTile>, kMaxStack> stack;
  std::array<std::array<float, kTile>, kMaxOutputs> out;
};

void run_tile(const ElementwiseProgram& p, std::span<const CpuOperand> ins, const Block& b,
              std::int64_t i, std::int64_t j0, std::int64_t n, Registers& r) {
  int top = -1;
  for (const Instr& in : p.code) {
    switch (in.code) {
      case OpCode::load: {
        const auto& op = ins[static_cast<std::size_t>(in.slot)];
        load_f32(op.data, op.dtype, op.access.at(i, j0), op.access.col_stride, n, r.stack[++top].data());
        break;
      }
      case OpCode::load_output:
        std::copy_n(r.out[static_cast<std::size_t>(in.slot)].data(), n, r.stack[++top].data());
        break;
      case OpCode::constant: std::fill_n(r.stack[++top].data(), n, in.value); break;
      case OpCode::unary: {
        float* a = r.stack[top].data();
        const auto op = static_cast<model::UnaryOp>(in.op);
        for (std::int64_t t = 0; t < n; ++t) a[t] = model::apply_unary(op, a[t]);
        break;
      }
      case OpCode::binary: {
        --top;
        float* a = r.stack[top].data();
        const float* c = r.stack[top + 1].data();
        const auto op = static_cast<model::BinaryOp>(in.op);
        for (std::int64_t t = 0; t < n; ++t) a[t] = model::apply_binary(op, a[t], c[t]);
        break;
      }
      case OpCode::select: {
        top -= 2;
        float* c = r.stack[top].data();
        const float* a = r.stack[top + 1].data();
        const float* e = r.stack[top + 2].data();
        for (std::int64_t t = 0; t < n; ++t) c[t] = c[t] != 0.0f ? a[t] : e[t];
        break;
      }
      case OpCode::round: {
        float* a = r.stack[top].data();
        for (std::int64_t t = 0; t < n; ++t) a[t] = round_to(in.dtype, a[t]);
        break;
      }
      case OpCode::dropout: {
        float* a = r.stack[top].data();
        for (std::int64_t t = 0; t < n; ++t)
          a[t] = model::dropout(a[t], in.value, in.seed, b.global_index(i, j0 + t));
        break;
      }
      case OpCode::store: {
        const float* a = r.stack[top--].data();
        float* o = r.out[static_cast<std::size_t>(in.slot)].data();
        const auto t_out = p.output_types[static_cast<std::size_t>(in.slot)];
        for (std::int64_t t = 0; t < n; ++t) o[t] = round_to(t_out, a[t]);
        break;
      }
    }
  }
}

}  // namespace

namespace {

// f16 <-> f32 over contiguous runs with x86's F16C instructions, where the
// CPU has them: bit for bit the conversions of kernels/half.h (exact
// widening; narrowing rounds to nearest even, keeps subnormals, overflows to
// infinity), 8 elements per instruction. NaNs stay NaN (their payload bits
// may differ from half.h's single quiet NaN). Measured: 32768 elements
// widened, doubled and narrowed in 59 us with half.h's bit manipulation,
// 3.3 us with F16C (this machine, one core).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define COCONET_HAVE_F16C_PATH 1
// CPUID leaf 1, ECX (Intel SDM vol. 2A, "CPUID"): OSXSAVE, AVX and F16C; and
// XCR0 bits 1-2 (the OS saves the SSE and AVX registers), read with XGETBV.
bool cpu_has_f16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    constexpr unsigned kOsxsave = 1u << 27, kAvx = 1u << 28, kF16c = 1u << 29;
    if ((ecx & (kOsxsave | kAvx | kF16c)) != (kOsxsave | kAvx | kF16c)) return false;
    unsigned xcr0 = 0, high = 0;
    __asm__("xgetbv" : "=a"(xcr0), "=d"(high) : "c"(0));
    constexpr unsigned kSseAvxState = 0x6;
    return (xcr0 & kSseAvxState) == kSseAvxState;
  }();
  return has;
}

__attribute__((target("f16c,avx"))) std::int64_t widen_f16c(const std::uint16_t* s, std::int64_t count, float* out) {
  std::int64_t k = 0;
  for (; k + 8 <= count; k += 8)
    _mm256_storeu_ps(out + k, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k))));
  return k;
}

__attribute__((target("f16c,avx"))) std::int64_t narrow_f16c(const float* in, std::int64_t count, std::uint16_t* d) {
  std::int64_t k = 0;
  for (; k + 8 <= count; k += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + k),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return k;
}
#endif

}  // namespace

bool f16c_conversions() {
#ifdef COCONET_HAVE_F16C_PATH
  return cpu_has_f16c();
#else
  return false;
#endif
}

void load_f32(const std::byte* data, model::DType t, std::int64_t first, std::int64_t stride,
              std::int64_t count, float* out) {
  switch (t) {
    case model::DType::f32: {
      const float* s = typed<float>(data) + first;
      if (stride == 1) {
        std::memcpy(out, s, static_cast<std::size_t>(count) * sizeof(float));
      } else {
        for (std::int64_t k = 0; k < count; ++k) out[k] = s[k * stride];
      }
      return;
    }
    case model::DType::f16: {
      const std::uint16_t* s = typed<std::uint16_t>(data) + first;
      std::int64_t k = 0;
#ifdef COCONET_HAVE_F16C_PATH
      if (stride == 1 && cpu_has_f16c()) k = widen_f16c(s, count, out);
#endif
      for (; k < count; ++k) out[k] = f16_to_float(s[k * stride]);
      return;
    }
    case model::DType::bf16: {
      const std::uint16_t* s = typed<std::uint16_t>(data) + first;
      for (std::int64_t k = 0; k < count; ++k) out[k] = bf16_to_float(s[k * stride]);
      return;
    }
  }
}

void store_f32(std::byte* data, model::DType t, std::int64_t first, std::int64_t stride,
               std::int64_t count, const float* in) {
  switch (t) {
    case model::DType::f32: {
      float* d = typed<float>(data) + first;
      for (std::int64_t k = 0; k < count; ++k) d[k * stride] = in[k];
      return;
    }
    case model::DType::f16: {
      std::uint16_t* d = typed<std::uint16_t>(data) + first;
      std::int64_t k = 0;
#ifdef COCONET_HAVE_F16C_PATH
      if (stride == 1 && cpu_has_f16c()) k = narrow_f16c(in, count, d);
#endif
      for (; k < count; ++k) d[k * stride] = float_to_f16(in[k]);
      return;
    }
    case model::DType::bf16: {
      std::uint16_t* d = typed<std::uint16_t>(data) + first;
      for (std::int64_t k = 0; k < count; ++k) d[k * stride] = float_to_bf16(in[k]);
      return;
    }
  }
}

void cpu_elementwise(const ElementwiseProgram& program, std::span<const CpuOperand> inputs,
                     std::span<const CpuOperand> outputs, const Block& block) {
  COCONET_ASSERT(inputs.size() == program.input_types.size(), "element-wise input count mismatch");
  COCONET_ASSERT(outputs.size() == program.output_types.size(), "element-wise output count mismatch");
  std::vector<CpuOperand> ins(inputs.begin(), inputs.end());
  std::vector<CpuOperand> outs(outputs.begin(), outputs.end());
  const Block b = flatten(block, ins, outs);
  auto regs = std::make_unique<Registers>();
  for (std::int64_t i = 0; i < b.rows; ++i) {
    for (std::int64_t j0 = 0; j0 < b.cols; j0 += kTile) {
      const std::int64_t n = std::min(kTile, b.cols - j0);
      run_tile(program, ins, b, i, j0, n, *regs);
      for (std::size_t k = 0; k < outs.size(); ++k)
        store_f32(outs[k].data, outs[k].dtype, outs[k].access.at(i, j0), outs[k].access.col_stride, n,
                  regs->out[k].data());
    }
  }
}

}  // namespace coconet::kernels
