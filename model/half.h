// 16-bit floating-point storage types of coconet (IEEE binary16 "f16" and
// bfloat16 "bf16"): conversions to and from f32 with round-to-nearest-even,
// host and device. Values are stored as 16 bits and computed in f32.
//
// Design notes
// - Bit manipulation on std::uint32_t, no compiler half type, so the same code
//   runs in plain C++ and under nvcc (COCONET_HD from model/host_device.h).
// - NaN stays NaN (quiet), infinities and overflow round to infinity,
//   f16 subnormals are produced and read exactly.
#pragma once

#include <cstdint>
#include <cstring>

#include "model/host_device.h"

namespace coconet::model {

COCONET_HD std::uint32_t float_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

COCONET_HD float bits_float(std::uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// bfloat16 is the upper half of an f32.
COCONET_HD std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

COCONET_HD float bf16_to_float(std::uint16_t h) { return bits_float(std::uint32_t{h} << 16); }

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
COCONET_HD std::uint16_t float_to_f16(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (abs < 0x38800000u) {  // below 2^-14: subnormal f16 (or zero)
    // Scale so that the f16 subnormal unit 2^-24 becomes 1 in the integer part.
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 113 - exp + 13
    if (shift > 24) return static_cast<std::uint16_t>(sign);
    const std::uint32_t q = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    const std::uint32_t up = (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
    return static_cast<std::uint16_t>(sign | (q + up));
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  const std::uint32_t rebased = abs - (112u << 23);
  const std::uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rebased + rounding) >> 13));
}

COCONET_HD float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  // Subnormal or zero: mant * 2^-24, exact in f32.
  const float magnitude = static_cast<float>(mant) * (1.0f / 16777216.0f);
  return sign ? -magnitude : magnitude;
}

}  // namespace coconet::model
