// The compute roofline: wave-quantised GEMMs and memory-bound element-wise
// kernels (what each op moves is plan/'s, tested in test_plan.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "model/error.h"
#include "model/catalog.h"
#include "model/parse.h"
#include "model/schedule.h"
#include "sim/compute.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace coconet::sim {
namespace {

TEST(Compute, GemmWavesQuantise) {
  const Topology t = load_topology("dgx-h100");
  ASSERT_EQ(t.gpu.sms, 132);
  const std::int64_t k = 16384;  // long enough to be compute-bound
  const GemmShape full{t.gpu.gemm_tile_m * 12, std::int64_t(t.gpu.gemm_tile_n) * 11, k};     // 132 tiles: one wave
  const GemmShape one_more{t.gpu.gemm_tile_m * 7, std::int64_t(t.gpu.gemm_tile_n) * 19, k};  // 133 tiles: two
  EXPECT_EQ(gemm_tiles(t, full), t.gpu.sms);
  EXPECT_EQ(gemm_tiles(t, one_more), t.gpu.sms + 1);
  EXPECT_NEAR(gemm_body_us(t, one_more, t.gpu.sms), 2 * gemm_body_us(t, full, t.gpu.sms), 1e-9);
  EXPECT_GT(gemm_body_us(t, full, t.gpu.sms - 16), gemm_body_us(t, full, t.gpu.sms));
}

// At the GPU's GEMM efficiency and the share of it a training run sustains.
TEST(Compute, GemmReachesItsEfficientPeak) {
  const Topology t = load_topology("dgx-h100");
  const GemmShape big{t.gpu.gemm_tile_m * 66, std::int64_t(t.gpu.gemm_tile_n) * 32, 16384};  // 16 full waves
  const double tflops = big.flops() / gemm_body_us(t, big, t.gpu.sms) / 1e6;
  EXPECT_NEAR(tflops, t.gpu.tflops_f16 * t.gpu.gemm_efficiency * t.gpu.sustained(), 1.0);
}

// A batched GEMM: every product its FLOPs, bytes and tiles; 11 products of
// 12 tiles (each compute-bound) fill the 132 SMs in one wave, as one GEMM of
// 132 tiles does, and a twelfth product takes a second wave.
TEST(Compute, BatchedGemmCountsEveryProduct) {
  const Topology t = load_topology("dgx-h100");
  const std::int64_t k = 16384;
  const GemmShape one{t.gpu.gemm_tile_m * 4, std::int64_t(t.gpu.gemm_tile_n) * 3, k};
  GemmShape batch = one;
  batch.batch = 11;
  EXPECT_DOUBLE_EQ(batch.flops(), 11 * one.flops());
  EXPECT_DOUBLE_EQ(batch.bytes(), 11 * one.bytes());
  EXPECT_EQ(gemm_tiles(t, batch), t.gpu.sms);
  const GemmShape full{t.gpu.gemm_tile_m * 12, std::int64_t(t.gpu.gemm_tile_n) * 11, k};
  EXPECT_NEAR(gemm_body_us(t, batch, t.gpu.sms), gemm_body_us(t, full, t.gpu.sms), 1e-9);
  batch.batch = 12;
  EXPECT_NEAR(gemm_body_us(t, batch, t.gpu.sms), 2 * gemm_body_us(t, full, t.gpu.sms), 1e-9);
}

// gpu.gemm_operand_GBps (the cpu backend's widening and packing): the GEMM's
// bytes at that rate on top of its arithmetic, for the dtype it names only;
// so a GEMM cut into row chunks pays its B operand once per chunk.
// A shipped topology's YAML with its own gemm_operand_GBps line (if any), and
// its line of the key `line` sets, replaced by `line` under `gpu:`.
std::string with_operand_rate(const std::string& name, const std::string& line) {
  std::ifstream in(model::resolve_topology(name));
  const std::string key = "  " + line.substr(0, line.find(':') + 1);
  std::string text, l;
  while (std::getline(in, l)) {
    if (l.find("gemm_operand_GBps") != std::string::npos || (!line.empty() && l.rfind(key, 0) == 0)) continue;
    text += l + "\n";
    if (l == "gpu:" && !line.empty()) text += "  " + line + "\n";
  }
  return text;
}

TEST(Compute, CpuGemmPaysItsOperandsBesidesItsFlops) {
  const Topology plain = parse_topology(with_operand_rate("cpu-local", ""), "plain.yaml");
  const Topology t = parse_topology(with_operand_rate("cpu-local", "gemm_operand_GBps: {f16: 2.5}"), "rate.yaml");
  const GemmShape g{256, 128, 256, model::DType::f16};
  EXPECT_NEAR(gemm_body_us(t, g, 1), gemm_body_us(plain, g, 1) + g.bytes() / 2.5e3, 1e-9);
  const GemmShape bf{256, 128, 256, model::DType::bf16};
  EXPECT_DOUBLE_EQ(gemm_body_us(t, bf, 1), gemm_body_us(plain, bf, 1));
  const GemmShape quarter{64, 128, 256, model::DType::f16};
  EXPECT_NEAR(4 * gemm_body_us(t, quarter, 1) - gemm_body_us(t, g, 1),
              3 * 256.0 * 128 * 2 / 2.5e3, 1e-9);  // B (K x N, f16) read three more times
}

// gpu.tflops.f32_gemm prices f32 GEMMs where it is given (the cpu backend's
// GEMM kernel, not its element-wise engine); absent, f32 GEMMs take tflops.f32.
TEST(Compute, F32GemmsTakeTheirOwnRateWhereGiven) {
  const auto with_tflops = [](const std::string& tflops) {
    std::ifstream in(model::resolve_topology("dgx-h100"));
    std::string text, l;
    while (std::getline(in, l)) text += (l.rfind("  tflops:", 0) == 0 ? "  tflops: " + tflops : l) + "\n";
    return parse_topology(text, "t.yaml");
  };
  const Topology plain = with_tflops("{f16: 989, bf16: 989, f32: 67}");
  const Topology own = with_tflops("{f16: 989, bf16: 989, f32: 67, f32_gemm: 495}");
  EXPECT_FALSE(plain.gpu.tflops_f32_gemm.has_value());
  const GemmShape f32{8192, 8192, 8192, model::DType::f32};
  const GemmShape f16{8192, 8192, 8192, model::DType::f16};
  EXPECT_NEAR(gemm_body_us(plain, f32, plain.gpu.sms) / gemm_body_us(own, f32, own.gpu.sms), 495.0 / 67.0, 0.05);
  EXPECT_DOUBLE_EQ(gemm_body_us(plain, f16, plain.gpu.sms), gemm_body_us(own, f16, own.gpu.sms));
  EXPECT_THROW((void)with_tflops("{f16: 989, bf16: 989, f32: 67, f32_gemm: 0}"), UserError);
}

// gpu.op_flops weighs each costly operation of an element-wise op; absent,
// the defaults (one FLOP each, dropout's hash none). Keys and values are checked.
TEST(Compute, CostlyOperationsTakeTheirWeights) {
  const model::Program p = model::parse_program(
      "name: t\nparams: {N: 65536}\ntensors:\n  x: {dtype: f32, shape: [N], layout: local}\n"
      "program:\n  - y = exp(x) + dropout(x, 0.1)\noutputs: [y]\n", "t.yaml");
  const model::Schedule s = model::initial_schedule(p);
  const auto time_of = [&](const std::string& line) {
    const Topology t = parse_topology(with_operand_rate("cpu-local", line), "w.yaml");
    return simulate(s, Context{t, 1, p.params, plan::BackendKind::cpu}).time_us;
  };
  const Topology plain = parse_topology(with_operand_rate("cpu-local", ""), "plain.yaml");
  const double us_per_flop = 1.0 / (plain.gpu.tflops_f32 * 1e6);
  const double defaults = time_of("op_flops: {exp: 1, dropout: 0}");
  EXPECT_NEAR(time_of("op_flops: {exp: 11, dropout: 0}") - defaults, 10 * 65536 * us_per_flop, 1e-6);
  EXPECT_NEAR(time_of("op_flops: {exp: 1, dropout: 4}") - defaults, 4 * 65536 * us_per_flop, 1e-6);
  const auto error_of = [](const std::string& line) {
    try {
      (void)parse_topology(with_operand_rate("cpu-local", line), "t.yaml");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // A norm's elements take op_flops.norm (default 2: its square and add).
  const model::Program n = model::parse_program(
      "name: n\nparams: {N: 65536}\ntensors:\n  x: {dtype: f32, shape: [N], layout: local}\n"
      "program:\n  - y = norm(x)\noutputs: [y]\n", "n.yaml");
  const auto norm_time = [&](const std::string& line) {
    const Topology t = parse_topology(with_operand_rate("cpu-local", line), "n.yaml");
    return simulate(model::initial_schedule(n), Context{t, 1, n.params, plan::BackendKind::cpu}).time_us;
  };
  // Norms of 2 and 3 FLOPs an element: both past the memory traffic's time
  // (an element-wise op takes the longer of the two), so each FLOP shows.
  EXPECT_NEAR(norm_time("op_flops: {norm: 3}") - norm_time("op_flops: {norm: 2}"), 65536 * us_per_flop, 1e-6);
  EXPECT_NEAR(norm_time("op_flops: {exp: 1}"), norm_time("op_flops: {norm: 2}"), 1e-9);
  EXPECT_NE(error_of("op_flops: {exp: -1}").find("gpu.op_flops.exp"), std::string::npos) << error_of("op_flops: {exp: -1}");
  EXPECT_NE(error_of("op_flops: {gelu: 3}").find("gelu"), std::string::npos) << error_of("op_flops: {gelu: 3}");
}

TEST(Compute, GemmOperandRateIsACpuKey) {
  const auto error_of = [](const std::string& name, const std::string& line) {
    try {
      (void)parse_topology(with_operand_rate(name, line), "t.yaml");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(error_of("dgx-h100", "gemm_operand_GBps: {f16: 2.5}").find("needs `device: cpu`"), std::string::npos)
      << error_of("dgx-h100", "gemm_operand_GBps: {f16: 2.5}");
  EXPECT_NE(error_of("cpu-local", "gemm_operand_GBps: {f16: -1}").find("gpu.gemm_operand_GBps.f16"), std::string::npos)
      << error_of("cpu-local", "gemm_operand_GBps: {f16: -1}");
  EXPECT_NE(error_of("cpu-local", "gemm_operand_GBps: {f64: 1}").find("f64"), std::string::npos)
      << error_of("cpu-local", "gemm_operand_GBps: {f64: 1}");
  EXPECT_EQ(error_of("cpu-local", "gemm_operand_GBps: {bf16: 1}"), "(accepted)");
  EXPECT_EQ(error_of("cpu-local", "gemm_operand_GBps: {f32: 1}"), "(accepted)");
  EXPECT_NE(error_of("dgx-h100", "gemm_operand_GBps: {}").find("needs `device: cpu`"), std::string::npos);
  EXPECT_NE(error_of("cpu-local", "gemm_operand_GBps: 2").find("gemm_operand_GBps"), std::string::npos)
      << error_of("cpu-local", "gemm_operand_GBps: 2");
}

TEST(Compute, ElementwiseIsHbmBound) {
  const Topology t = load_topology("dgx-h100");
  const double bytes = 1e9;
  EXPECT_NEAR(elementwise_body_us(t, bytes, 1e6), bytes / (t.gpu.hbm_effective_GBps() * 1e3), 1e-9);
}

}  // namespace
}  // namespace coconet::sim
