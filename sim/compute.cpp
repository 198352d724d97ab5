// Roofline formulas over the topology's GPU constants.
#include "sim/compute.h"

#include "model/error.h"
#include "sim/units.h"

#include <algorithm>
#include <cmath>

namespace coconet::sim {

namespace {
constexpr double kFp8Bytes = 1;  // an FP8 (E4M3 or E5M2) element
}  // namespace

double GemmShape::bytes() const {
  const double e = model::bytes_of(dtype);
  const double in = fp8 ? kFp8Bytes : e;
  return double(batch) * (in * (double(m) * double(k) + double(k) * double(n)) + e * double(m) * double(n));
}

double gemm_peak_tflops(const Topology& t, const GemmShape& g) {
  if (!g.fp8) return t.gpu.gemm_tflops(g.dtype);
  if (!t.gpu.tflops_fp8)
    throw UserError("topology '" + t.name + "' states no FP8 rate (gpu.tflops.fp8): FP8 GEMMs cannot be priced on it");
  return *t.gpu.tflops_fp8;
}

double fp8_cast_body_us(const Topology& t, double elements) {
  constexpr double kCastBytes = 2 + kFp8Bytes;  // a 16-bit element read, its FP8 written
  return elementwise_body_us(t, kCastBytes * elements, elements);
}

double roofline_us(double bytes, double bytes_per_us, double flops, double flops_per_us) {
  return std::max(bytes / bytes_per_us, flops / flops_per_us);
}

double gemm_flops_us(double flops, double flops_per_us) { return flops / flops_per_us; }

double gemm_operands_us(double bytes, double operand_GBps) {
  return operand_GBps > 0 && std::isfinite(operand_GBps) ? bytes / (operand_GBps * kBytesPerGBpsUs) : 0.0;
}

double ArithmeticTerms::us(const GpuSpec& g) const {
  double us = base_us;
  for (int k = 0; k < model::kCostlyOps; ++k) us += per_weight_us[std::size_t(k)] * g.op_flops(model::CostlyOp(k));
  return us;
}

ArithmeticTerms elementwise_arithmetic(const Topology& t, double flops, const CostlyCounts& costly) {
  const double flops_per_us = t.gpu.tflops_f32 * kFlopsPerTflopsUs;
  ArithmeticTerms a;
  a.base_us = flops / flops_per_us;
  for (int k = 0; k < model::kCostlyOps; ++k) a.per_weight_us[std::size_t(k)] = costly[std::size_t(k)] / flops_per_us;
  return a;
}

double elementwise_body_us(const Topology& t, double hbm_bytes, const ArithmeticTerms& arithmetic) {
  return std::max(hbm_bytes / (t.gpu.hbm_effective_GBps() * kBytesPerGBpsUs), arithmetic.us(t.gpu));
}

double elementwise_body_us(const Topology& t, double hbm_bytes, double flops) {
  return elementwise_body_us(t, hbm_bytes, elementwise_arithmetic(t, flops));
}

std::int64_t gemm_tiles(const Topology& t, const GemmShape& g) {
  const std::int64_t tm = t.gpu.gemm_tile_m;
  const std::int64_t tn = t.gpu.gemm_tile_n;
  return g.batch * ((g.m + tm - 1) / tm) * ((g.n + tn - 1) / tn);
}

double gemm_body_us(const Topology& t, const GemmShape& g, int sms) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return 0.0;
  sms = std::clamp(sms, 1, t.gpu.sms);
  const double per_sm = gemm_peak_tflops(t, g) * t.gpu.gemm_efficiency * t.gpu.sustained() / t.gpu.sms;
  const double tile_us = gemm_flops_us(2.0 * t.gpu.gemm_tile_m * t.gpu.gemm_tile_n * double(g.k), per_sm * kFlopsPerTflopsUs);
  const std::int64_t waves = (gemm_tiles(t, g) + sms - 1) / sms;
  // Where the operands have a rate of their own (the cpu backend widens and
  // packs them before its arithmetic, on the same thread), that term is their
  // traffic, and the bytes are not counted again as a floor over memory.
  const double operands = gemm_operands_us(g.bytes(), t.gpu.gemm_operand_GBps(g.dtype));
  const double mem = operands > 0 ? 0.0 : g.bytes() / (t.gpu.hbm_effective_GBps() * kBytesPerGBpsUs);
  return std::max(double(waves) * tile_us, mem) + operands;
}

}  // namespace coconet::sim
