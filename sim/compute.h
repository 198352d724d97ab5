// The roofline cost of computation on one GPU: element-wise kernels by the
// bytes they move over HBM (or their FLOPs, whichever takes longer), GEMMs by
// FLOPs over the tensor-core peak with tile and wave quantisation, norms as
// reductions (bytes read). Each kernel pays one launch.
#pragma once

#include <array>
#include <cstdint>

#include "model/types.h"
#include "sim/topology.h"

namespace coconet::sim {

// `batch` independent [m x k] x [k x n] products in one call (a strided
// batched GEMM; 1: a plain GEMM).
struct GemmShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  model::DType dtype = model::DType::f16;
  std::int64_t batch = 1;
  // In FP8 (Transformer Engine's recipe: operands cast to 8 bits, the result
  // in `dtype`), at the GPU's FP8 rate (gpu.tflops.fp8).
  bool fp8 = false;

  [[nodiscard]] double flops() const { return 2.0 * double(batch) * double(m) * double(n) * double(k); }
  // Bytes of every A, B and C, each read or written once (A and B of one
  // byte in FP8).
  [[nodiscard]] double bytes() const;
};

// The three terms every compute price is made of (the simulator's and
// calibration's fits alike, validation/fit.h); rates per microsecond or GB/s.
// A body bound by memory or arithmetic: bytes at `bytes_per_us` or FLOPs at
// `flops_per_us`, whichever takes longer.
[[nodiscard]] double roofline_us(double bytes, double bytes_per_us, double flops, double flops_per_us);
// A GEMM's arithmetic at `flops_per_us`.
[[nodiscard]] double gemm_flops_us(double flops, double flops_per_us);
// A GEMM's operands read and written at `operand_GBps` beside its arithmetic
// (gpu.gemm_operand_GBps, the cpu backend's); 0 when it is not finite and positive.
[[nodiscard]] double gemm_operands_us(double bytes, double operand_GBps);

// Counts of each costly operation (model::CostlyOp) an element-wise kernel performs.
using CostlyCounts = std::array<double, model::kCostlyOps>;

// An element-wise kernel's arithmetic time as terms linear in the costly
// operations' weights (gpu.op_flops, in FLOPs at the f32 rate):
// us(gpu) = base_us + sum over k of per_weight_us[k] x gpu.op_flops(k).
// The simulator prices a kernel's arithmetic with it; calibration fits the
// weights to these same terms (validation/calibrate.h fit_op_flops).
struct ArithmeticTerms {
  double base_us = 0;            // the kernel's own FLOPs
  CostlyCounts per_weight_us{};  // each costly operation's count, per FLOP of its weight
  [[nodiscard]] double us(const GpuSpec& g) const;
};
[[nodiscard]] ArithmeticTerms elementwise_arithmetic(const Topology& t, double flops, const CostlyCounts& costly = {});

// Time of the kernel body (no launch): max(bytes over HBM, its arithmetic).
[[nodiscard]] double elementwise_body_us(const Topology& t, double hbm_bytes, const ArithmeticTerms& arithmetic);
// The same for plain FLOPs at the f32 rate (no costly operations).
[[nodiscard]] double elementwise_body_us(const Topology& t, double hbm_bytes, double flops);
// A GEMM's tensor-core peak: gpu.tflops.fp8 for an FP8 GEMM (a UserError
// when the topology states none), else the rate of its dtype.
[[nodiscard]] double gemm_peak_tflops(const Topology& t, const GemmShape& g);
// Time of the kernel that casts a GEMM's 16-bit operand of `elements` to
// FP8 and takes its amax (Transformer Engine's cast: 2 bytes read, 1
// written per element, the amax reduced in the same pass), without launch.
[[nodiscard]] double fp8_cast_body_us(const Topology& t, double elements);
// Tiles of a GEMM (tile_m x tile_n output tiles), every product of a batch its own.
[[nodiscard]] std::int64_t gemm_tiles(const Topology& t, const GemmShape& g);
// Time of a GEMM body (no launch) with `sms` SMs at hand: waves of tiles, each
// tile at the per-SM share of the achievable peak, at least its bytes over
// HBM; or, where the topology has gpu.gemm_operand_GBps (the cpu backend),
// the waves plus its bytes at that rate (the operands' traffic, no floor).
[[nodiscard]] double gemm_body_us(const Topology& t, const GemmShape& g, int sms);

}  // namespace coconet::sim
