// Bulk conversions between stored elements and f32 for the cpu kernels
// (load_f32, store_f32, round_f32 of kernels/cpu_elementwise.h).
//
// Design notes
// - Every conversion gives the values of model/half.h's scalar ones bit for
//   bit (NaN need only stay NaN), so a block converts exactly as the
//   interpreter's elements do.
// - f16 runs through x86's F16C instructions where the CPU has them, 8
//   elements per instruction; the tail and strided runs use half.h.
// - The entry points are cloned per x86 level (kernels/cpu_clones.h).
// - bf16 is written branch-free over whole runs (the NaN test a select), so
//   the compiler vectorises it; bf16 is the upper half of an f32. The
//   element and 8-lane conversions are kernels/cpu_half_lanes.h's.
#include <bit>
#include <cstring>

#include "kernels/cpu_clones.h"
#include "kernels/cpu_elementwise.h"
#include "kernels/cpu_half_lanes.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace coconet::kernels {
namespace {

template <typename T>
const T* typed(const std::byte* p) {
  return reinterpret_cast<const T*>(p);
}
template <typename T>
T* typed(std::byte* p) {
  return reinterpret_cast<T*>(p);
}

// f16 <-> f32 with F16C, where the CPU has it. Measured: 32768 elements
// widened, doubled and narrowed in 59 us with half.h's bit manipulation,
// 3.3 us with F16C (one core).
#ifdef COCONET_HAVE_F16C_PATH
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
  for (; k + kHalfLanes <= count; k += kHalfLanes) widen_f16_lanes(s + k, out + k);
  return k;
}

__attribute__((target("f16c,avx"))) std::int64_t narrow_f16c(const float* in, std::int64_t count, std::uint16_t* d) {
  std::int64_t k = 0;
  for (; k + kHalfLanes <= count; k += kHalfLanes) narrow_f16_lanes(in + k, d + k);
  return k;
}

// x -> f16 -> f32 in place: the value an f16 store and load would give.
__attribute__((target("f16c,avx"))) std::int64_t round_f16c(float* x, std::int64_t count) {
  std::int64_t k = 0;
  for (; k + 8 <= count; k += 8)
    _mm256_storeu_ps(x + k, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + k), kF16Rne)));
  return k;
}
#endif

std::int64_t widen_f16_fast(const std::uint16_t* s, std::int64_t count, float* out) {
#ifdef COCONET_HAVE_F16C_PATH
  if (cpu_has_f16c()) return widen_f16c(s, count, out);
#endif
  return 0;
}

std::int64_t narrow_f16_fast(const float* in, std::int64_t count, std::uint16_t* d) {
#ifdef COCONET_HAVE_F16C_PATH
  if (cpu_has_f16c()) return narrow_f16c(in, count, d);
#endif
  return 0;
}

std::int64_t round_f16_fast(float* x, std::int64_t count) {
#ifdef COCONET_HAVE_F16C_PATH
  if (cpu_has_f16c()) return round_f16c(x, count);
#endif
  return 0;
}

void load_bf16(const std::uint16_t* s, std::int64_t stride, std::int64_t count, float* out) {
  if (stride == 1) {
    for (std::int64_t k = 0; k < count; ++k) out[k] = bf16_value(s[k]);
  } else {
    for (std::int64_t k = 0; k < count; ++k) out[k] = bf16_value(s[k * stride]);
  }
}

void store_bf16(std::uint16_t* d, std::int64_t stride, std::int64_t count, const float* in) {
  if (stride == 1) {
    for (std::int64_t k = 0; k < count; ++k) d[k] = bf16_bits(in[k]);
  } else {
    for (std::int64_t k = 0; k < count; ++k) d[k * stride] = bf16_bits(in[k]);
  }
}

}  // namespace

bool f16c_conversions() {
#ifdef COCONET_HAVE_F16C_PATH
  return cpu_has_f16c();
#else
  return false;
#endif
}

bool half_lanes() {
#ifdef COCONET_HAVE_F16C_PATH
  static const bool has = cpu_has_f16c() && __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

COCONET_CPU_CLONES void load_f32(const std::byte* data, model::DType t, std::int64_t first, std::int64_t stride,
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
      std::int64_t k = stride == 1 ? widen_f16_fast(s, count, out) : 0;
      for (; k < count; ++k) out[k] = model::f16_to_float(s[k * stride]);
      return;
    }
    case model::DType::bf16: load_bf16(typed<std::uint16_t>(data) + first, stride, count, out); return;
  }
}

COCONET_CPU_CLONES void store_f32(std::byte* data, model::DType t, std::int64_t first, std::int64_t stride,
               std::int64_t count, const float* in) {
  switch (t) {
    case model::DType::f32: {
      float* d = typed<float>(data) + first;
      if (stride == 1) {
        std::memcpy(d, in, static_cast<std::size_t>(count) * sizeof(float));
      } else {
        for (std::int64_t k = 0; k < count; ++k) d[k * stride] = in[k];
      }
      return;
    }
    case model::DType::f16: {
      std::uint16_t* d = typed<std::uint16_t>(data) + first;
      std::int64_t k = stride == 1 ? narrow_f16_fast(in, count, d) : 0;
      for (; k < count; ++k) d[k * stride] = model::float_to_f16(in[k]);
      return;
    }
    case model::DType::bf16: store_bf16(typed<std::uint16_t>(data) + first, stride, count, in); return;
  }
}

COCONET_CPU_CLONES void round_f32(model::DType t, std::int64_t count, float* x) {
  switch (t) {
    case model::DType::f32: return;
    case model::DType::f16: {
      for (std::int64_t k = round_f16_fast(x, count); k < count; ++k) x[k] = model::f16_to_float(model::float_to_f16(x[k]));
      return;
    }
    case model::DType::bf16:
      for (std::int64_t k = 0; k < count; ++k) x[k] = bf16_value(bf16_bits(x[k]));
      return;
  }
}

}  // namespace coconet::kernels
