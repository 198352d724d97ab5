// The element-wise operators of the program model and their scalar math,
// defined once: the operator semantics and the counter-based dropout RNG, as
// inline functions usable on host and device. The reference interpreter, the
// CPU backend and the CUDA kernels all call these, so a value means the same
// thing everywhere.
//
// Design notes
// - Header-only and dependency-free (the standard library and COCONET_HD),
//   so that model/ depends on nothing else of coconet while kernels/, CUDA
//   code included, evaluates with the same definitions.
// - Dropout is keyed by (seed, global element index) through a Philox-style
//   integer mix: the mask of element i does not depend on which rank holds i,
//   on the slice it lives in, or on the chunk it is processed in.
#pragma once

#include <cmath>
#include <cstdint>

#include "model/host_device.h"

namespace coconet::model {

enum class UnaryOp : std::uint8_t { neg, sqrt, rsqrt, abs, exp, log, tanh, gelu };

// GELU in its tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))):
// Hendrycks and Gimpel, "Gaussian Error Linear Units (GELUs)", arXiv:1606.08415,
// section 2 (the approximation GPT-2 and Megatron-LM use).
inline constexpr double kGeluSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double kGeluCubic = 0.044715;

template <typename T>
COCONET_HD T gelu_tanh(T x) {
  const T inner = T(kGeluSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(inner));
}
enum class BinaryOp : std::uint8_t { add, sub, mul, div, pow, max, min, lt, le, gt, ge, eq, ne };

template <typename T>
COCONET_HD T apply_unary(UnaryOp op, T a) {
  switch (op) {
    case UnaryOp::neg: return -a;
    case UnaryOp::sqrt: return std::sqrt(a);
    case UnaryOp::rsqrt: return T(1) / std::sqrt(a);
    case UnaryOp::abs: return std::fabs(a);
    case UnaryOp::exp: return std::exp(a);
    case UnaryOp::log: return std::log(a);
    case UnaryOp::tanh: return std::tanh(a);
    case UnaryOp::gelu: return gelu_tanh(a);
  }
  return a;
}

// Floating-point operations one application counts in the cost model: a
// transcendental (sqrt, exp, log, tanh) counts as one, as the roofline of
// sim/ prices every element-wise FLOP alike; gelu is its nine: x*x*x (2),
// *0.044715, +x, *sqrt(2/pi), tanh, +1, *x, *0.5.
// Operations whose cost per element differs between devices far more than an
// add's: special functions (a GPU's special-function units, a CPU's library
// calls), pow, dropout's hash, and an element of a norm (a square and an
// add into the sum: a reduction, which the cpu backend runs as a loop of its
// own, not through the element-wise engine the FLOP rate is fitted on). The
// cost model prices each at its own weight in FLOPs (gpu.op_flops,
// calibrated on CPUs); absent, at kDefaultOpFlops, each special function one
// FLOP, the hash none (integer work beside dropout's compare and scale), a
// norm's element its two.
enum class CostlyOp : std::uint8_t { sqrt, rsqrt, exp, log, tanh, pow, dropout_hash, norm_element };
inline constexpr int kCostlyOps = 8;
inline constexpr double kDefaultOpFlops[kCostlyOps] = {1, 1, 1, 1, 1, 1, 0, 2};
// GELU's tanh form besides its tanh: 3 multiplies and an add inside, the
// scale by sqrt(2/pi), 1 + tanh, and two multiplies outside.
inline constexpr int kGeluArithmetic = 8;

template <typename T>
COCONET_HD T apply_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::pow: return std::pow(a, b);
    case BinaryOp::max: return a > b ? a : b;
    case BinaryOp::min: return a < b ? a : b;
    case BinaryOp::lt: return a < b ? T(1) : T(0);
    case BinaryOp::le: return a <= b ? T(1) : T(0);
    case BinaryOp::gt: return a > b ? T(1) : T(0);
    case BinaryOp::ge: return a >= b ? T(1) : T(0);
    case BinaryOp::eq: return a == b ? T(1) : T(0);
    case BinaryOp::ne: return a != b ? T(1) : T(0);
  }
  return a;
}

// Philox-style 64-bit mix (two rounds of multiply-xorshift with the constants
// of SplitMix64, Steele et al., "Fast splittable pseudorandom number
// generators", OOPSLA'14). Enough for a dropout mask; not for cryptography.
COCONET_HD std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Uniform in [0, 1) from (seed, global element index), 24 bits of mantissa so
// that f32 and f64 agree exactly on the value.
COCONET_HD float dropout_uniform(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t bits = mix64(mix64(seed) ^ (index * 0x9e3779b97f4a7c15ULL));
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// Dropout keeps an element with probability 1-p and scales kept ones by 1/(1-p).
template <typename T>
COCONET_HD T dropout(T x, float p, std::uint64_t seed, std::uint64_t index) {
  if (p <= 0.0f) return x;
  return dropout_uniform(seed, index) < p ? T(0) : x / T(1.0f - p);
}

}  // namespace coconet::model
