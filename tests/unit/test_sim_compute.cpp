// The compute roofline and the bytes each stage moves, from statement types.
#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"
#include "sim/compute.h"
#include "sim/stage_work.h"

namespace coconet::sim {
namespace {

model::Program workload(const std::string& name) { return model::load_program(model::resolve_workload(name)); }

const model::Schedule& named(const std::vector<model::Schedule>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name() == name) return s;
  throw std::runtime_error("no schedule " + name);
}

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

TEST(Compute, GemmReachesItsEfficientPeak) {
  const Topology t = load_topology("dgx-h100");
  const GemmShape big{t.gpu.gemm_tile_m * 66, std::int64_t(t.gpu.gemm_tile_n) * 32, 16384};  // 16 full waves
  const double tflops = big.flops() / gemm_body_us(t, big, t.gpu.sms) / 1e6;
  EXPECT_NEAR(tflops, t.gpu.tflops_f16 * t.gpu.gemm_efficiency, 1.0);
}

TEST(Compute, ElementwiseIsHbmBound) {
  const Topology t = load_topology("dgx-h100");
  const double bytes = 1e9;
  EXPECT_NEAR(elementwise_body_us(t, bytes, 1e6), bytes / (t.gpu.hbm_effective_GBps() * 1e3), 1e-9);
}

TEST(StageWork, AdamOptimizerMovesItsBytesOnce) {
  const model::Program p = workload("adam");
  const Topology t = load_topology("dgx-h100");
  const std::int64_t n = 1000;
  const int ranks = 3;  // ragged: rank 0 holds 334 elements
  const Context ctx{t, ranks, {{"N", n}}};
  const auto all = model::enumerate_schedules(p);
  // AR-C: reads g1 (f16) and w, m, v (f32), writes w1, m1, v1 (f32): 26 bytes an element.
  const auto ar_c = stage_work(named(all, "AR-C"), ctx);
  ASSERT_EQ(ar_c.size(), 2u);
  EXPECT_EQ(ar_c[0].collectives.at(0).op, CollOp::allreduce);
  EXPECT_DOUBLE_EQ(ar_c[0].collectives.at(0).bytes, 2.0 * n);
  EXPECT_DOUBLE_EQ(ar_c[1].hbm_bytes, 26.0 * n);
  // Fused RS-C-AG with sliced state: the reduced gradient slice never touches HBM.
  const auto fused = stage_work(named(all, "fuse(RS-C-AG)+asSlice(m,v)"), ctx);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_DOUBLE_EQ(fused[0].hbm_bytes, 24.0 * 334);
  ASSERT_EQ(fused[0].collectives.size(), 2u);
  EXPECT_DOUBLE_EQ(fused[0].collectives[0].bytes, 2.0 * 334 * ranks);  // RS of f16, largest slice x P
  EXPECT_DOUBLE_EQ(fused[0].collectives[1].bytes, 4.0 * 334 * ranks);  // AG of the f32 weights
}

TEST(StageWork, MegatronGemmShapeIsLocal) {
  const model::Program p = workload("megatron_mlp");
  const Context ctx{load_topology("dgx2-v100"), 16, p.params};
  const auto w = stage_work(model::baseline(p), ctx);
  ASSERT_TRUE(w.at(0).has_gemm);
  EXPECT_EQ(w[0].gemm.m, 8 * 1024);
  EXPECT_EQ(w[0].gemm.k, 4 * 3072 / 16);
  EXPECT_EQ(w[0].gemm.n, 3072);
}

TEST(StageWork, DefaultGroupSizeSplitsTheGpus) {
  const Topology t = load_topology("dgx-h100");
  EXPECT_EQ(default_group_size(t, workload("adam")), 32);
  EXPECT_EQ(default_group_size(t, workload("gpt3_pipeline")), 16);
}

}  // namespace
}  // namespace coconet::sim
