// 16-bit <-> f32 conversions of single elements and of 8 lanes at a time,
// shared by the bulk conversions (kernels/cpu_convert.cpp) and the loops of
// the element-wise engine that convert inside their own loop
// (kernels/cpu_elementwise.cpp). Internal to kernels/.
//
// Design notes
// - Every function gives model/half.h's values bit for bit (NaN need only
//   stay NaN).
// - bf16 elements are branch-free (the NaN test a select), so a separate
//   loop of them vectorises at any x86 level; inside a loop that also
//   computes, the compiler leaves them scalar, so there 8 lanes go through
//   AVX2 instructions explicitly.
// - f16 lanes use F16C (8 lanes an instruction).
// - The 8-lane functions carry their target attribute (F16C, AVX2), so a
//   function cloned for x86-64-v3 or v4 (kernels/cpu_clones.h) inlines them;
//   a baseline clone calls them out of line, so a caller runs them only
//   where half_lanes() is true.
#pragma once

#include <bit>
#include <cstdint>

#include "model/half.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define COCONET_HAVE_F16C_PATH 1
#endif

namespace coconet::kernels {

// half.h's float_to_bf16 without branches: a NaN keeps its upper half, made
// quiet; anything else rounds to nearest even.
inline std::uint16_t bf16_bits(float f) {
  const auto u = std::bit_cast<std::uint32_t>(f);
  constexpr std::uint32_t kAbs = 0x7fffffffu, kInf = 0x7f800000u, kQuiet = 0x40u, kHalfUlp = 0x7fffu;
  const std::uint32_t nan = (u >> 16) | kQuiet;
  const std::uint32_t rounded = (u + kHalfUlp + ((u >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>((u & kAbs) > kInf ? nan : rounded);
}

inline float bf16_value(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t{h} << 16); }

// The lanes a 16-bit conversion handles at once (one F16C instruction, or a
// few AVX2 ones, on a 256-bit register).
inline constexpr std::int64_t kHalfLanes = 8;

// Whether this CPU runs the 8-lane functions below as F16C and AVX2
// instructions (kernels/cpu_convert.cpp).
[[nodiscard]] bool half_lanes();

#ifdef COCONET_HAVE_F16C_PATH
// Round to nearest even, exceptions suppressed (F16C's rounding control).
inline constexpr int kF16Rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

__attribute__((target("f16c,avx"))) inline void widen_f16_lanes(const std::uint16_t* s, float* out) {
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s))));
}

__attribute__((target("f16c,avx"))) inline void narrow_f16_lanes(const float* in, std::uint16_t* d) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm256_cvtps_ph(_mm256_loadu_ps(in), kF16Rne));
}

__attribute__((target("avx2"))) inline void widen_bf16_lanes(const std::uint16_t* s, float* out) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
  _mm256_storeu_ps(out, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
}

// bf16_bits on 8 lanes: the rounded upper halves, a NaN's upper half made
// quiet where the magnitude exceeds infinity's bits (both below 2^31, so a
// signed compare), packed to 16 bits (every value fits, no saturation).
__attribute__((target("avx2"))) inline void narrow_bf16_lanes(const float* in, std::uint16_t* d) {
  const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(in));
  const __m256i upper = _mm256_srli_epi32(u, 16);
  const __m256i one = _mm256_set1_epi32(1), half_ulp = _mm256_set1_epi32(0x7fff);
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, half_ulp), _mm256_and_si256(upper, one)), 16);
  const __m256i nan = _mm256_or_si256(upper, _mm256_set1_epi32(0x40));
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i bits = _mm256_blendv_epi8(rounded, nan, is_nan);
  // packus packs within each 128-bit half: lanes 0-3 and 4-7 land in the
  // low 64 bits of each half; the permute brings them together.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm256_castsi256_si128(packed));
}
#else
inline void widen_f16_lanes(const std::uint16_t* s, float* out) {
  for (std::int64_t k = 0; k < kHalfLanes; ++k) out[k] = model::f16_to_float(s[k]);
}

inline void narrow_f16_lanes(const float* in, std::uint16_t* d) {
  for (std::int64_t k = 0; k < kHalfLanes; ++k) d[k] = model::float_to_f16(in[k]);
}

inline void widen_bf16_lanes(const std::uint16_t* s, float* out) {
  for (std::int64_t k = 0; k < kHalfLanes; ++k) out[k] = bf16_value(s[k]);
}

inline void narrow_bf16_lanes(const float* in, std::uint16_t* d) {
  for (std::int64_t k = 0; k < kHalfLanes; ++k) d[k] = bf16_bits(in[k]);
}
#endif

}  // namespace coconet::kernels
