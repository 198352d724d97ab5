// Host-side tests of the fused-collective hook: which fuse(RS-C-AG) stages
// exec/fused_stage.h recognises as the SGD or Adam update the fused kernels
// compute (by evaluating them), the spec it builds (views of the right
// values and sizes, ragged shards included), and what it must refuse: the
// moments gathered instead of kept sliced, a formula that differs, a stage
// that is not a fused allreduce. No backend and no GPU needed.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "exec/fused_stage.h"
#include "exec/launch.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"

namespace coconet::exec {
namespace {

model::Program workload(const std::string& name) {
  return model::load_program(model::resolve_workload(name));
}

// The schedule of `p` with this exact name.
model::Schedule schedule_named(const model::Program& p, const std::string& name) {
  for (auto& s : model::enumerate_schedules(p))
    if (s.name() == name) return s;
  ADD_FAILURE() << p.name << " has no schedule " << name;
  return {};
}

const model::Stage* fused_stage(const model::Schedule& s) {
  for (const auto& st : s.stages)
    if (st.code(s.program) == "fuse(RS-C-AG)") return &st;
  return nullptr;
}

std::optional<FusedStageSpec> recognise(const model::Schedule& s, std::int64_t n, int ranks, int position) {
  const Plan plan(s.program, {{"N", n}}, ranks, 0, position);
  const auto* st = fused_stage(s);
  if (st == nullptr) return std::nullopt;
  return recognise_fused_allreduce(s.program, *st, plan);
}

TEST(FusedStage, AdamWithSlicedMomentsIsRecognisedOnEveryRank) {
  const auto p = workload("adam");
  const auto s = schedule_named(p, "fuse(RS-C-AG)+asSlice(m,v)");
  constexpr std::int64_t kN = 1001;  // ragged over 2, 3 and 4 ranks
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (int r = 0; r < ranks; ++r) {
      const auto spec = recognise(s, kN, ranks, r);
      ASSERT_TRUE(spec.has_value()) << ranks << " ranks, position " << r;
      const auto shard = model::slice_extent(kN, ranks, r).size;
      EXPECT_EQ(spec->update, FusedUpdate::adam);
      EXPECT_EQ(spec->count, kN);
      EXPECT_EQ(spec->g.count, kN);
      EXPECT_EQ(spec->w.count, kN);
      EXPECT_EQ(spec->w_out.count, kN);
      EXPECT_EQ(spec->g_shard.count, shard);
      for (const View& v : {spec->m, spec->v, spec->m_out, spec->v_out}) EXPECT_EQ(v.count, shard);
      EXPECT_DOUBLE_EQ(spec->hyper.lr, p.scalars.at("lr"));
      EXPECT_DOUBLE_EQ(spec->hyper.beta1, p.scalars.at("beta1"));
      EXPECT_DOUBLE_EQ(spec->hyper.beta2, p.scalars.at("beta2"));
      EXPECT_DOUBLE_EQ(spec->hyper.eps, p.scalars.at("eps"));
    }
}

TEST(FusedStage, AdamRolesAreTheRightValues) {
  const auto s = schedule_named(workload("adam"), "fuse(RS-C-AG)+asSlice(m,v)");
  Plan plan(s.program, {{"N", 64}}, 2, 0, 1);
  // Give every value a distinct fake buffer id, so the spec's views name them.
  int id = 0;
  std::map<int, std::string> names;
  for (const auto& [name, v] : plan.values()) {
    plan.at(name).buffer = id;
    names[id++] = name;
  }
  const auto spec = recognise_fused_allreduce(s.program, *fused_stage(s), plan);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(names[spec->g.buffer], "g");
  EXPECT_EQ(names[spec->w.buffer], "w");
  EXPECT_EQ(names[spec->m.buffer], "m");
  EXPECT_EQ(names[spec->v.buffer], "v");
  EXPECT_EQ(names[spec->w_out.buffer], "w1");
  EXPECT_EQ(names[spec->m_out.buffer], "m1");
  EXPECT_EQ(names[spec->v_out.buffer], "v1");
}

TEST(FusedStage, SgdIsRecognised) {
  const auto p = workload("sgd");
  const auto spec = recognise(schedule_named(p, "fuse(RS-C-AG)"), 1001, 3, 2);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->update, FusedUpdate::sgd);
  EXPECT_EQ(spec->g_shard.count, model::slice_extent(1001, 3, 2).size);
  EXPECT_DOUBLE_EQ(spec->hyper.lr, p.scalars.at("lr"));
}

TEST(FusedStage, AdamWithGatheredMomentsIsNotTheKernelsPattern) {
  const auto s = schedule_named(workload("adam"), "fuse(RS-C-AG)");
  EXPECT_FALSE(recognise(s, 1001, 2, 0).has_value());
}

TEST(FusedStage, ADifferentFormulaIsRefused) {
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
  EXPECT_FALSE(recognise(schedule_named(p, "fuse(RS-C-AG)+asSlice(m,v)"), 1024, 2, 0).has_value());
}

TEST(FusedStage, OtherStagesAreNotFusedAllreduces) {
  const auto s = schedule_named(workload("adam"), "RS-C-AG+asSlice(m,v)");
  const Plan plan(s.program, {{"N", 1024}}, 2, 0, 0);
  for (const auto& st : s.stages) EXPECT_FALSE(recognise_fused_allreduce(s.program, st, plan).has_value());
}

// The launcher's argument list (exec/launch.h): the flags a container needs, root only when root.
TEST(Launch, MpirunArgumentsCarryTheContainerFlagsAndTheCommand) {
  const auto args = mpirun_arguments("/usr/bin/mpirun", 3, "/bin/coconet", {"run", "sgd"}, false);
  const std::vector<std::string> head{"/usr/bin/mpirun", "-np", "3"};
  EXPECT_TRUE(std::equal(head.begin(), head.end(), args.begin()));
  for (const char* flag : {"--oversubscribe", "self,vader", "btl_vader_single_copy_mechanism", "mpi_yield_when_idle"})
    EXPECT_NE(std::find(args.begin(), args.end(), flag), args.end()) << flag;
  EXPECT_EQ(std::find(args.begin(), args.end(), "--allow-run-as-root"), args.end());
  EXPECT_EQ(args[args.size() - 3], "/bin/coconet");
  EXPECT_EQ(args.back(), "sgd");
  const auto root = mpirun_arguments("mpirun", 2, "x", {}, true);
  EXPECT_NE(std::find(root.begin(), root.end(), "--allow-run-as-root"), root.end());
}

}  // namespace
}  // namespace coconet::exec
