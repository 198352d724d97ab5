// Lowering: what each op of a StepPlan moves and computes on rank 0, which
// fuse(RS-C-AG) stages each backend runs as one op (recognised by what they
// compute), chunking of overlap groups, and the issue order with lags.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "model/enumerate.h"
#include "model/parse.h"
#include "plan/fused_match.h"
#include "plan/step_plan.h"
#include "test_sched_util.h"

namespace coconet::plan {
namespace {

using model::sched_test::workload;

model::Schedule named(const model::Program& p, const std::string& name) {
  for (auto& s : model::enumerate_schedules(p))
    if (s.name() == name) return s;
  ADD_FAILURE() << p.name << " has no schedule " << name;
  return model::initial_schedule(p);
}

const model::Stage& fused_stage(const model::Schedule& s) {
  for (const auto& st : s.stages)
    if (st.kind == model::StageKind::fused) return st;
  throw std::runtime_error("no fused stage in " + s.name());
}

int fused_ops(const StepPlan& p) {
  return int(std::count_if(p.ops.begin(), p.ops.end(), [](const Op& op) { return op.cls == OpClass::fused; }));
}

TEST(Work, AdamMovesItsBytesOnce) {
  const model::Program p = workload("adam");
  const std::int64_t n = 1000;
  const int ranks = 3;  // ragged: rank 0 holds 334 elements
  // AR-C: reads g1 (f16) and w, m, v (f32), writes w1, m1, v1 (f32): 26 bytes an element.
  const StepPlan ar_c = lower(named(p, "AR-C"), {{"N", n}}, ranks, cuda_capabilities());
  ASSERT_EQ(ar_c.ops.size(), 2u);
  EXPECT_EQ(ar_c.ops[0].work.collectives.at(0).op, model::OpKind::allreduce);
  EXPECT_DOUBLE_EQ(ar_c.ops[0].work.collectives.at(0).bytes, 2.0 * n);
  EXPECT_DOUBLE_EQ(ar_c.ops[1].work.hbm_bytes, 26.0 * n);
  // Fused RS-C-AG with sliced state on cuda: one op; the reduced gradient slice never touches memory.
  const StepPlan fused = lower(named(p, "fuse(RS-C-AG)+asSlice(m,v)"), {{"N", n}}, ranks, cuda_capabilities());
  ASSERT_EQ(fused.ops.size(), 1u);
  EXPECT_EQ(fused.ops[0].cls, OpClass::fused);
  EXPECT_DOUBLE_EQ(fused.ops[0].work.hbm_bytes, 24.0 * 334);
  ASSERT_EQ(fused.ops[0].work.collectives.size(), 2u);
  EXPECT_DOUBLE_EQ(fused.ops[0].work.collectives[0].bytes, 2.0 * 334 * ranks);  // RS of f16, largest slice x P
  EXPECT_DOUBLE_EQ(fused.ops[0].work.collectives[1].bytes, 4.0 * 334 * ranks);  // AG of the f32 weights
}

TEST(Work, MegatronGemmShapeIsLocal) {
  const model::Program p = workload("megatron_mlp");
  const StepPlan plan = lower(model::baseline(p), p.params, 16, cuda_capabilities());
  ASSERT_TRUE(plan.ops.at(0).work.gemm.has_value());
  EXPECT_EQ(plan.ops[0].work.gemm->m, 8 * 1024);
  EXPECT_EQ(plan.ops[0].work.gemm->k, 4 * 3072 / 16);
  EXPECT_EQ(plan.ops[0].work.gemm->n, 3072);
}

TEST(Capabilities, EachBackendFusesOnlyWhatItRuns) {
  const model::Program adam = workload("adam");
  const model::Program sgd = workload("sgd");
  const auto adam_fused = named(adam, "fuse(RS-C-AG)+asSlice(m,v)");
  const auto sgd_fused = named(sgd, "fuse(RS-C-AG)");
  EXPECT_EQ(fused_ops(lower(adam_fused, {{"N", 37}}, 2, cuda_capabilities())), 1);
  EXPECT_EQ(fused_ops(lower(adam_fused, {{"N", 37}}, 2, cpu_capabilities())), 0);
  EXPECT_EQ(fused_ops(lower(sgd_fused, {{"N", 37}}, 2, cuda_capabilities())), 0);  // cuda declines SGD
  Capabilities both = cpu_capabilities();
  both.fused_updates = {FusedUpdate::sgd, FusedUpdate::adam};
  EXPECT_EQ(fused_ops(lower(sgd_fused, {{"N", 37}}, 2, both)), 1);
}

TEST(Capabilities, LambRunsAsItsPartsOnCuda) {
  const model::Program p = workload("lamb");
  for (const auto& s : model::enumerate_schedules(p)) {
    const StepPlan plan = lower(s, model::sched_test::small_sizes(p).front(), 2, cuda_capabilities());
    EXPECT_EQ(fused_ops(plan), 0) << s.name();
  }
}

TEST(Capabilities, ParseNamesTheFlag) {
  EXPECT_EQ(parse_backend("cpu"), BackendKind::cpu);
  try {
    (void)parse_backend("tpu", "--backend");
    FAIL() << "tpu accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--backend tpu"), std::string::npos) << e.what();
  }
}

TEST(FusedMatch, AdamRolesAreTheRightValues) {
  const auto s = named(workload("adam"), "fuse(RS-C-AG)+asSlice(m,v)");
  const auto m = match_fused_update(s.program, fused_stage(s));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->update, FusedUpdate::adam);
  EXPECT_EQ(m->g, "g");
  EXPECT_EQ(m->w, "w");
  EXPECT_EQ(m->m, "m");
  EXPECT_EQ(m->v, "v");
  EXPECT_EQ(m->w_out, "w1");
  EXPECT_EQ(m->m_out, "m1");
  EXPECT_EQ(m->v_out, "v1");
  EXPECT_DOUBLE_EQ(m->hyper.lr, s.program.scalars.at("lr"));
  EXPECT_DOUBLE_EQ(m->hyper.eps, s.program.scalars.at("eps"));
}

TEST(FusedMatch, SgdIsRecognised) {
  const auto s = named(workload("sgd"), "fuse(RS-C-AG)");
  const auto m = match_fused_update(s.program, fused_stage(s));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->update, FusedUpdate::sgd);
}

TEST(FusedMatch, AdamWithGatheredMomentsIsNotTheKernelsPattern) {
  const auto s = named(workload("adam"), "fuse(RS-C-AG)");
  EXPECT_FALSE(match_fused_update(s.program, fused_stage(s)).has_value());
}

TEST(FusedMatch, ADifferentFormulaIsRefused) {
  // Adam with the bias of the first moment wrong: (1-beta2) instead of (1-beta1).
  const auto p = model::parse_program(R"(
name: adam_wrong
params: {N: 1024}
scalars: {lr: 1.0e-3, beta1: 0.9, beta2: 0.999, eps: 1.0e-8}
tensors:
  g: {dtype: f16, shape: [N], layout: local}
  w: {dtype: f32, shape: [N], layout: replicated}
  m: {dtype: f32, shape: [N], layout: replicated, shardable: true}
  v: {dtype: f32, shape: [N], layout: replicated, shardable: true}
program:
  - g1 = allreduce(sum, g)
  - m1 = update(m, beta1*m + (1-beta2)*g1)
  - v1 = update(v, beta2*v + (1-beta2)*g1*g1)
  - w1 = update(w, w - lr*m1/(sqrt(v1)+eps))
outputs: [w1, m1, v1]
)",
                                      "adam_wrong");
  const auto s = named(p, "fuse(RS-C-AG)+asSlice(m,v)");
  EXPECT_FALSE(match_fused_update(s.program, fused_stage(s)).has_value());
  EXPECT_EQ(fused_ops(lower(s, p.params, 2, cuda_capabilities())), 0);
}

TEST(FusedMatch, OtherStagesAreNotFusedAllreduces) {
  const auto s = named(workload("adam"), "RS-C-AG+asSlice(m,v)");
  for (const auto& st : s.stages) EXPECT_FALSE(match_fused_update(s.program, st).has_value());
}

TEST(Chunks, AnOverlapGroupIsCutAndComputeLagsItsCommunication) {
  const model::Program p = workload("megatron_mlp");
  auto s = named(p, "ol(MM,AR)-C");
  s.knobs.chunks = 4;
  const StepPlan plan = lower(s, p.params, 8, cpu_capabilities());
  const Unit& u = plan.units.front();
  EXPECT_TRUE(u.overlapped);
  EXPECT_EQ(u.chunks, 4);
  EXPECT_EQ(u.name, "ol(MM,AR)");
  ASSERT_EQ(u.ops.size(), 2u);
  EXPECT_EQ(plan.op(u.ops[1]).stream, Stream::comm);
  EXPECT_EQ(plan.op(u.ops[1]).producers, std::vector<int>{u.ops[0]});
  // MM chunk k and AR chunk k are issued in step k (a collective does not lag the kernel it reads).
  const auto order = issue_order(plan, u);
  ASSERT_EQ(order.size(), 8u);
  EXPECT_EQ(order[0], (Launch{u.ops[0], 0}));
  EXPECT_EQ(order[1], (Launch{u.ops[1], 0}));
  double shares = 0;
  for (int c = 0; c < u.chunks; ++c) shares += chunk_share(u, c);
  EXPECT_DOUBLE_EQ(shares, 1.0);
}

TEST(Chunks, AFusedStageRunAsItsPartsIsPipelined) {
  const model::Program p = workload("adam");
  auto fused = named(p, "fuse(RS-C-AG)+asSlice(m,v)");
  fused.knobs.chunks = 4;
  const StepPlan cpu = lower(fused, {{"N", 37}}, 2, cpu_capabilities());
  ASSERT_EQ(cpu.units.size(), 1u);
  EXPECT_TRUE(cpu.units[0].pipelined);
  EXPECT_TRUE(cpu.units[0].slice_mode);
  EXPECT_EQ(cpu.units[0].chunks, 4);
  // RS, then the update a chunk behind, then its all-gather: chunk k computes while k+1 reduces.
  const auto order = issue_order(cpu, cpu.units[0]);
  EXPECT_EQ(cpu.op(order[0].op).code, "RS");
  EXPECT_EQ(cpu.op(order[1].op).code, "RS");
  EXPECT_EQ(order[1].chunk, 1);
  EXPECT_EQ(cpu.op(order[2].op).code, "C");
  EXPECT_EQ(order[2].chunk, 0);
  // The same stage unfused is three whole units.
  auto parts = named(p, "RS-C-AG+asSlice(m,v)");
  parts.knobs.chunks = 4;
  const StepPlan split = lower(parts, {{"N", 37}}, 2, cpu_capabilities());
  EXPECT_EQ(split.units.size(), 3u);
  for (const Unit& u : split.units) EXPECT_EQ(u.chunks, 1) << u.name;
  // Without the capability the fused stage runs whole, as its parts in turn.
  Capabilities none = cpu_capabilities();
  none.pipelined_fusions = false;
  EXPECT_EQ(lower(fused, {{"N", 37}}, 2, none).units[0].chunks, 1);
}

TEST(Chunks, NothingOutsideAnOverlapGroupIsCut) {
  const model::Program p = workload("adam");
  auto s = named(p, "AR-C");
  s.knobs.chunks = 4;
  for (const Unit& u : lower(s, {{"N", 37}}, 2, cpu_capabilities()).units) EXPECT_EQ(u.chunks, 1) << u.name;
}

TEST(Describe, NamesEveryOpAndTheBackend) {
  const model::Program p = workload("adam");
  const std::string text = describe(lower(named(p, "fuse(RS-C-AG)+asSlice(m,v)"), {{"N", 37}}, 2,
                                          cuda_capabilities()));
  EXPECT_NE(text.find("fused adam update"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda"), std::string::npos) << text;
  EXPECT_NE(text.find("reducescatter"), std::string::npos) << text;
}

}  // namespace
}  // namespace coconet::plan
