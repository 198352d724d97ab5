// Each transformation on its own: the statements it produces, their inferred
// layouts, the stages, the history, and that outputs keep their names.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/builder.h"
#include "model/transforms.h"
#include "unit/test_sched_util.h"

namespace coconet::model {
namespace {

using sched_test::workload;

std::vector<std::string> stmt_names(const Program& p) {
  std::vector<std::string> out;
  for (const auto& s : p.stmts) out.push_back(s.name);
  return out;
}

const Stmt& stmt(const Schedule& s, const std::string& n) {
  const Stmt* st = s.program.find_stmt(n);
  EXPECT_NE(st, nullptr) << n;
  return *st;
}

TEST(Split, AllreduceBecomesReducescatterThenAllgather) {
  const Schedule s = split(initial_schedule(workload("adam")), "g1");
  EXPECT_EQ(stmt_names(s.program), (std::vector<std::string>{"g1.rs", "g1", "m1", "v1", "w1"}));
  EXPECT_EQ(stmt(s, "g1.rs").op, OpKind::reducescatter);
  EXPECT_EQ(stmt(s, "g1.rs").operands, (std::vector<std::string>{"g"}));
  EXPECT_EQ(stmt(s, "g1.rs").type.layout, Layout::sliced(0));
  EXPECT_EQ(stmt(s, "g1").op, OpKind::allgather);
  EXPECT_EQ(stmt(s, "g1").operands, (std::vector<std::string>{"g1.rs"}));
  EXPECT_EQ(stmt(s, "g1").type.layout, Layout::replicated());
  EXPECT_EQ(s.name(), "RS-AG-C");
  EXPECT_EQ(s.history, (std::vector<Directive>{Split{"g1"}}));
}

TEST(Split, KeepsTheReduction) {
  const Program p = ProgramBuilder("maxes")
                        .param("N", 8)
                        .tensor("x", DType::f32, {"N"}, Layout::local())
                        .stmt("y = allreduce(max, x)")
                        .output("y")
                        .build();
  const Schedule s = split(initial_schedule(p), "y");
  EXPECT_EQ(stmt(s, "y.rs").reduce, ReduceOp::max);
}

TEST(Reorder, AdamMovesTheUpdatesOntoSlices) {
  const Schedule s = reorder(split(initial_schedule(workload("adam")), "g1"), "g1");
  EXPECT_EQ(stmt_names(s.program),
            (std::vector<std::string>{"g1.rs", "m1.s", "v1.s", "w1.s", "m1", "v1", "w1"}));
  for (const char* n : {"m1.s", "v1.s", "w1.s"}) {
    EXPECT_EQ(stmt(s, n).op, OpKind::update);
    EXPECT_EQ(stmt(s, n).type.layout, Layout::sliced(0)) << n;
  }
  EXPECT_EQ(stmt(s, "m1.s").target, "m");
  for (const char* n : {"m1", "v1", "w1"}) {
    EXPECT_EQ(stmt(s, n).op, OpKind::allgather);
    EXPECT_EQ(stmt(s, n).type.layout, Layout::replicated());
  }
  EXPECT_EQ(s.program.outputs, (std::vector<std::string>{"w1", "m1", "v1"}));
  EXPECT_EQ(s.name(), "RS-C-AG");
}

TEST(Reorder, LambHoistsTheIndependentNormAndKeepsNormNames) {
  const Schedule s = reorder(split(initial_schedule(workload("lamb")), "g1"), "g1");
  EXPECT_EQ(stmt_names(s.program), (std::vector<std::string>{"g1.rs", "wn", "m1.s", "v1.s", "u.s",
                                                             "un", "w1.s", "m1", "v1", "w1"}));
  EXPECT_EQ(stmt(s, "un").operands, (std::vector<std::string>{"u.s"}));
  EXPECT_EQ(stmt(s, "un").type.layout, Layout::replicated());
  EXPECT_TRUE(stmt(s, "un").type.shape.empty());
  EXPECT_EQ(s.program.find_stmt("u"), nullptr);  // u is needed by moved statements only
  EXPECT_EQ(s.name(), "RS-C-AG");
}

TEST(Reorder, PipelineSendsSlicesToTheNextGroup) {
  const Schedule s = reorder(split(initial_schedule(workload("gpt3_pipeline")), "z"), "z");
  EXPECT_EQ(stmt_names(s.program), (std::vector<std::string>{"z.rs", "z1.s", "out.s", "out"}));
  EXPECT_EQ(stmt(s, "z1.s").op, OpKind::send);
  EXPECT_EQ(stmt(s, "z1.s").type.layout, Layout::sliced(0));
  EXPECT_EQ(stmt(s, "z1.s").type.group, 1);
  EXPECT_EQ(stmt(s, "out").type.group, 1);
  EXPECT_EQ(s.name(), "RS-P2P-C-AG");
}

TEST(Reorder, MegatronGathersTheOutputOnly) {
  const Schedule s = reorder(split(initial_schedule(workload("megatron_mlp")), "z"), "z");
  EXPECT_EQ(stmt_names(s.program), (std::vector<std::string>{"y", "z.rs", "out.s", "out"}));
  EXPECT_EQ(s.name(), "MM-RS-C-AG");
}

TEST(Reorder, StatementsNeedingTheWholeValueStayAfterTheAllgather) {
  // `t` reads a local operand, so it cannot run on slices; it keeps reading g1 whole.
  const Program p = ProgramBuilder("mixed")
                        .param("N", 8)
                        .tensor("g", DType::f32, {"N"}, Layout::local())
                        .tensor("h", DType::f32, {"N"}, Layout::local())
                        .tensor("w", DType::f32, {"N"}, Layout::replicated())
                        .stmt("g1 = allreduce(sum, g)")
                        .stmt("a = g1 * w")
                        .stmt("t = g1 + h")
                        .output("a")
                        .output("t")
                        .build();
  const Schedule s = reorder(split(initial_schedule(p), "g1"), "g1");
  EXPECT_EQ(stmt_names(s.program), (std::vector<std::string>{"g1.rs", "a.s", "g1", "a", "t"}));
  EXPECT_EQ(stmt(s, "t").type.layout, Layout::local());
}

TEST(AsSlice, KeepsTheMomentSlicedAndDropsItsAllgather) {
  Schedule s = reorder(split(initial_schedule(workload("adam")), "g1"), "g1");
  s = as_slice(std::move(s), "m");
  const TensorDecl* m = s.program.find_input("m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->type.layout, Layout::sliced(0));
  EXPECT_EQ(stmt(s, "m1").op, OpKind::update);
  EXPECT_EQ(stmt(s, "m1").type.layout, Layout::sliced(0));
  EXPECT_EQ(s.program.find_stmt("m1.s"), nullptr);
  // w1's update now reads the sliced m1 directly
  const auto reads = Program::reads(stmt(s, "w1.s"));
  EXPECT_NE(std::find(reads.begin(), reads.end(), "m1"), reads.end());
  EXPECT_EQ(s.program.outputs, (std::vector<std::string>{"w1", "m1", "v1"}));
  EXPECT_EQ(s.name(), "RS-C-AG+asSlice(m)");
  EXPECT_EQ(s.history.back(), Directive(AsSlice{"m"}));
}

TEST(Fuse, ReducescatterComputationAndAllgathersFormAFusedAllreduce) {
  Schedule s = reorder(split(initial_schedule(workload("sgd")), "g1"), "g1");
  s = fuse(std::move(s), "g1.rs", "w1");
  ASSERT_EQ(s.stages.size(), 1u);
  EXPECT_EQ(s.stages[0].kind, StageKind::fused);
  EXPECT_EQ(s.stages[0].stmts, (std::vector<std::string>{"g1.rs", "w1.s", "w1"}));
  EXPECT_EQ(s.name(), "fuse(RS-C-AG)");
}

TEST(Fuse, CollectiveWithItsConsumers) {
  EXPECT_EQ(fuse(initial_schedule(workload("adam")), "g1", "w1").name(), "fuse(AR-C)");
  EXPECT_EQ(fuse(initial_schedule(workload("gpt3_pipeline")), "z1", "out").name(),
            "AR-fuse(P2P-C)");
}

TEST(Fuse, ReducescatterWithComputationOnly) {
  const Schedule s = reorder(split(initial_schedule(workload("adam")), "g1"), "g1");
  EXPECT_EQ(fuse(s, "g1.rs", "w1.s").name(), "fuse(RS-C)-AG");
  EXPECT_EQ(fuse(s, "g1.rs", "m1").name(), "fuse(RS-C-AG)-AG");  // m1's gather only
}

TEST(Fuse, ShiftsLaterOverlapGroups) {
  const Program p = ProgramBuilder("two_chains")
                        .param("N", 8)
                        .param("M", 4)
                        .param("K", 6)
                        .tensor("x", DType::f32, {"N"}, Layout::local())
                        .tensor("a", DType::f32, {"M", "K"}, Layout::sliced(1))
                        .tensor("w", DType::f32, {"K", "N"}, Layout::sliced(0))
                        .stmt("s1 = allreduce(sum, x)")
                        .stmt("c1 = s1 * 2")
                        .stmt("y = matmul(a, w)")
                        .stmt("z = allreduce(sum, y)")
                        .output("c1")
                        .output("z")
                        .build();
  Schedule s = overlap(initial_schedule(p), "y", "z");
  EXPECT_EQ(s.name(), "AR-C-ol(MM,AR)");
  s = fuse(std::move(s), "s1", "c1");
  ASSERT_EQ(s.overlaps.size(), 1u);
  EXPECT_EQ(s.overlaps[0].first, 1);
  EXPECT_EQ(s.overlaps[0].last, 2);
  EXPECT_EQ(s.name(), "fuse(AR-C)-ol(MM,AR)");
}

TEST(Overlap, MatmulWithItsAllreduceGetsDefaultChunks) {
  const Schedule s = overlap(initial_schedule(workload("megatron_mlp")), "y", "z");
  EXPECT_EQ(s.name(), "ol(MM,AR)-C");
  EXPECT_EQ(s.knobs.chunks, 4);
  EXPECT_EQ(s.history.back(), Directive(Overlap{"y", "z"}));
}

TEST(Overlap, KeepsChunksChosenBefore) {
  Schedule s = initial_schedule(workload("megatron_mlp"));
  s.knobs.chunks = 16;
  EXPECT_EQ(overlap(std::move(s), "y", "z").knobs.chunks, 16);
}

TEST(Overlap, ReducescatterFusedSendAndAllgather) {
  Schedule s = reorder(split(initial_schedule(workload("gpt3_pipeline")), "z"), "z");
  s = overlap(fuse(std::move(s), "z1.s", "out.s"), "z.rs", "out");
  EXPECT_EQ(s.name(), "ol(RS,fuse(P2P-C),AG)");
}

TEST(DeadCode, RemovesWhatNoOutputNeeds) {
  Program p = ProgramBuilder("dead")
                  .param("N", 8)
                  .tensor("x", DType::f32, {"N"}, Layout::replicated())
                  .stmt("a = x * 2")
                  .stmt("b = a + 1")
                  .stmt("c = x - 1")
                  .output("b")
                  .build();
  p = remove_dead_code(std::move(p));
  EXPECT_EQ(stmt_names(p), (std::vector<std::string>{"a", "b"}));
}

TEST(Apply, ReplaysEachDirective) {
  const Program p = workload("gpt3_pipeline");
  Schedule direct =
      overlap(fuse(reorder(split(initial_schedule(p), "z"), "z"), "z1.s", "out.s"), "z.rs", "out");
  Schedule replayed = initial_schedule(p);
  for (const auto& d : direct.history) replayed = apply(std::move(replayed), d);
  EXPECT_EQ(replayed.name(), direct.name());
  EXPECT_EQ(to_string(replayed.program), to_string(direct.program));
}

}  // namespace
}  // namespace coconet::model
