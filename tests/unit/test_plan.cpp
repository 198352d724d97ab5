// Lowering: what each op of a StepPlan moves and computes on rank 0, the
// fused form of every fused stage (head, passes, gathers, scratch, pieces),
// chunking of overlap groups, and the issue order with lags.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "model/enumerate.h"
#include "model/parse.h"
#include "plan/fused_form.h"
#include "plan/step_plan.h"
#include "test_sched_util.h"
#include "tests/paths.h"

namespace coconet::plan {
namespace {

using model::sched_test::workload;

model::Schedule named(const model::Program& p, const std::string& name) {
  for (auto& s : model::enumerate_schedules(p))
    if (s.name() == name) return s;
  ADD_FAILURE() << p.name << " has no schedule " << name;
  return model::initial_schedule(p);
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

// A row reduction is an op of its own, priced like a norm: memory-bound,
// its input read once and one value per row written, one FLOP an element.
TEST(Work, RowReductionReadsItsInputOnceAndWritesARowEach) {
  const model::Program p =
      model::load_program(coconet::test::source_root() + "/tests/workloads/layernorm_softmax.yaml");
  const model::Bindings b{{"B", 2}, {"S", 5}, {"H", 8}};
  const int ranks = 4;  // 10 rows: rank 0 of a row slice holds 3
  for (const auto& [schedule, rows] : {std::pair{"MM-AR-C-AR-C", 10}, std::pair{"MM-RS-C-AR-C-AG", 3}}) {
    const StepPlan plan = lower(named(p, schedule), b, ranks, cuda_capabilities());
    const auto op = std::find_if(plan.ops.begin(), plan.ops.end(), [](const Op& o) { return o.stmts.front() == "v" || o.stmts.front() == "v.s"; });
    ASSERT_NE(op, plan.ops.end()) << schedule;
    EXPECT_EQ(op->cls, OpClass::rowreduce);
    EXPECT_EQ(op->code, "rowsum");
    EXPECT_DOUBLE_EQ(op->work.flops, rows * 8.0) << schedule;
    EXPECT_DOUBLE_EQ(op->work.hbm_bytes, rows * 8.0 * 4 + rows * 4.0) << schedule;  // f32 [rows, 8] in, [rows, 1] out
  }
  // Over the sliced inner dimension: each rank's partial sums over its 32/4 columns.
  const StepPlan plan = lower(named(p, "MM-AR-C-AR-C"), b, ranks, cuda_capabilities());
  const auto xp = std::find_if(plan.ops.begin(), plan.ops.end(), [](const Op& o) { return o.stmts.front() == "xp"; });
  ASSERT_NE(xp, plan.ops.end());
  EXPECT_DOUBLE_EQ(xp->work.hbm_bytes, 10 * 8.0 * 4 + 10 * 4.0);
}

TEST(Work, MegatronGemmShapeIsLocal) {
  const model::Program p = workload("megatron_mlp");
  const StepPlan plan = lower(model::baseline(p), p.params, 16, cuda_capabilities());
  ASSERT_TRUE(plan.ops.at(0).work.gemm.has_value());
  EXPECT_EQ(plan.ops[0].work.gemm->m, 8 * 1024);
  EXPECT_EQ(plan.ops[0].work.gemm->k, 4 * 3072 / 16);
  EXPECT_EQ(plan.ops[0].work.gemm->n, 3072);
}

// A batched matmul's GEMM is rank 0's batches of [M x K] x [K x N]: the
// attention scores of 3 of the 2 x 5 heads on 4 ranks (10 over 4: 3 on rank 0).
TEST(Work, BatchedGemmIsRankZerosBatches) {
  const model::Program p = workload("transformer_layer");
  const model::Bindings b{{"B", 2}, {"S", 6}, {"NH", 5}, {"D", 4}};
  const StepPlan plan = lower(model::baseline(p), b, 4, cuda_capabilities());
  const auto op_of = [&](const std::string& stmt) {
    return *std::find_if(plan.ops.begin(), plan.ops.end(), [&](const Op& o) { return o.stmts.front() == stmt; });
  };
  const Op scores = op_of("sc");
  ASSERT_TRUE(scores.work.gemm.has_value());
  EXPECT_EQ(scores.work.gemm->batch, 3);
  EXPECT_EQ(scores.work.gemm->m, 6);
  EXPECT_EQ(scores.work.gemm->k, 4);
  EXPECT_EQ(scores.work.gemm->n, 6);
  EXPECT_EQ(scores.calls, std::vector<int>{1});
  const Op context = op_of("ctx");
  EXPECT_EQ(context.work.gemm->batch, 3);
  EXPECT_EQ(context.work.gemm->k, 6);
  EXPECT_EQ(context.work.gemm->n, 4);
  // A 2-D weight folds a's rows: one product, batch 1.
  EXPECT_EQ(op_of("u").work.gemm->batch, 1);
  EXPECT_EQ(op_of("u").work.gemm->m, 12);
  EXPECT_NE(describe(plan).find("gemm 3 x [6x4]x[4x6] f32"), std::string::npos) << describe(plan);
  // A chunk's part of the op: its share of the batches.
  EXPECT_EQ(scores.work.gemm->part(1.0 / 3, 1).batch, 1);
  EXPECT_EQ(scores.work.gemm->part(1.0 / 3, 1).m, 6);
  EXPECT_EQ(op_of("u").work.gemm->part(0.5, 2).m, 3);
}

// An alltoall is one collective of rank 0's slice (nccl-tests' size for alltoall).
TEST(Work, AlltoallMovesRankZerosSlice) {
  const model::Program p =
      model::load_program(coconet::test::source_root() + "/tests/workloads/alltoall_ulysses.yaml");
  const model::Bindings b{{"B", 1}, {"S", 7}, {"H", 5}};
  const StepPlan plan = lower(model::baseline(p), b, 3, cuda_capabilities());
  std::vector<double> bytes;
  for (const Op& op : plan.ops)
    for (const auto& c : op.work.collectives) {
      EXPECT_EQ(c.op, model::OpKind::alltoall);
      EXPECT_EQ(op.code, "A2A");
      bytes.push_back(c.bytes);
    }
  // Rank 0 holds 3 of 7 rows (sliced(0)) of the first's input and 2 of 5 columns of the second's.
  EXPECT_EQ(bytes, (std::vector<double>{3 * 5 * 4.0, 7 * 2 * 4.0}));
}

TEST(FusedForm, EveryFusedStageOfEveryWorkloadIsOneFusedOp) {
  int fused_stages = 0;
  for (const char* w : {"sgd", "adam", "lamb", "megatron_mlp", "megatron_attention", "gpt3_pipeline"}) {
    const model::Program p = workload(w);
    for (auto s : model::enumerate_schedules(p)) {
      const int stages = int(std::count_if(s.stages.begin(), s.stages.end(),
                                           [](const auto& st) { return st.kind == model::StageKind::fused; }));
      fused_stages += stages;
      s.knobs.chunks = 3;
      for (const auto& caps : {cuda_capabilities(), cpu_capabilities()}) {
        const StepPlan plan = lower(s, model::sched_test::small_sizes(p).front(), 2, caps);
        EXPECT_EQ(fused_ops(plan), stages) << w << " " << s.name();
        for (const Unit& u : plan.units) EXPECT_EQ(u.as_parts, "") << w << " " << s.name();
      }
    }
  }
  EXPECT_GE(fused_stages, 20);  // the count `coconet show` lists for these workloads
}

TEST(FusedForm, AdamWithSlicedMomentsKeepsOnlyTheShardsInScratch) {
  const auto s = named(workload("adam"), "fuse(RS-C-AG)+asSlice(m,v)");
  const StepPlan plan = lower(s, {{"N", 37}}, 2, cpu_capabilities());
  ASSERT_EQ(plan.ops.size(), 1u);
  const FusedForm& f = *plan.ops[0].fused;
  EXPECT_EQ(f.head, "g1.rs");
  ASSERT_EQ(f.passes.size(), 1u);
  EXPECT_EQ(f.passes[0].stmts, (std::vector<std::string>{"m1", "v1", "w1.s"}));
  EXPECT_EQ(f.gathers, std::vector<std::string>{"w1"});
  // The reduced gradient and the new weights' shard live per piece; the moments are outputs.
  EXPECT_EQ(f.scratch, (std::set<std::string>{"g1.rs", "w1.s"}));
  // The program is compiled from the statements: the gradient shard, w and the moments in, three results out.
  EXPECT_EQ(f.passes[0].program.output_names, f.passes[0].stmts);
  EXPECT_EQ(f.passes[0].program.input_names.size(), 4u);
}

TEST(FusedForm, LambsNormsSplitItIntoPasses) {
  const auto s = named(workload("lamb"), "fuse(RS-C-AG)+asSlice(m,v)");
  const StepPlan plan = lower(s, {{"N", 37}}, 2, cuda_capabilities());
  const FusedForm& f = *plan.ops.at(0).fused;
  ASSERT_EQ(f.norms_before.size(), 1u);  // ||w||: w is there before the stage
  EXPECT_EQ(f.norms_before[0].stmt, "wn");
  EXPECT_FALSE(f.norms_before[0].across_group);
  ASSERT_EQ(f.passes.size(), 2u);
  EXPECT_EQ(f.passes[0].stmts, (std::vector<std::string>{"m1", "v1", "u.s"}));
  ASSERT_EQ(f.passes[0].norms_after.size(), 1u);  // ||u|| over the slices: partial sums allreduced
  EXPECT_TRUE(f.passes[0].norms_after[0].across_group);
  EXPECT_EQ(f.passes[1].stmts, std::vector<std::string>{"w1.s"});
  EXPECT_FALSE(f.scratch.contains("u.s"));  // the second pass and the norm read it whole
}

TEST(FusedForm, PiecesFollowTheBackendsPieceBytes) {
  const model::Program p = workload("adam");
  const auto s = named(p, "fuse(RS-C-AG)+asSlice(m,v)");
  const std::int64_t n = 16 * 1024 * 1024;  // 2 ranks: 8 Mi f16 gradient elements a slice, 16 MiB
  EXPECT_EQ(lower(s, {{"N", n}}, 2, cpu_capabilities()).ops[0].fused->pieces, 64);  // 256 KiB pieces
  EXPECT_EQ(lower(s, {{"N", n}}, 2, cuda_capabilities()).ops[0].fused->pieces, 1);  // 32 MiB pieces
  const StepPlan cpu = lower(s, {{"N", n}}, 2, cpu_capabilities());
  EXPECT_EQ(cpu.ops[0].calls, std::vector<int>{64});  // each piece calls each collective once
  EXPECT_EQ(lower(s, {{"N", 3}}, 2, cpu_capabilities()).ops[0].fused->pieces, 1);  // never more than the rows
  // In an overlap group the group's chunks are the pieces.
  auto ol = named(workload("megatron_mlp"), "ol(MM,fuse(AR-C))");
  ol.knobs.chunks = 4;
  const StepPlan olp = lower(ol, workload("megatron_mlp").params, 2, cpu_capabilities());
  ASSERT_EQ(olp.units.size(), 1u);
  EXPECT_EQ(olp.units[0].chunks, 4);
  EXPECT_EQ(olp.op(olp.units[0].ops.back()).fused->pieces, 1);
}

TEST(FusedForm, AStageOfAnotherShapeIsRefusedWithTheReason) {
  const model::Program p = workload("megatron_mlp");
  const auto views = rank_views(p, p.params, 2, RankId{0, 0});
  std::string why;
  const model::Stage starts_with_gemm{model::StageKind::fused, {p.stmts.front().name, p.stmts[1].name}};
  EXPECT_FALSE(fused_form(p, starts_with_gemm, views, why).has_value());
  EXPECT_NE(why.find("not a collective"), std::string::npos) << why;
  const model::Stage compute_only{model::StageKind::compute, {p.stmts.back().name}};
  EXPECT_FALSE(fused_form(p, compute_only, views, why).has_value());
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

TEST(Chunks, AFusedStageIsOneLaunchThatPipelinesItself) {
  const model::Program p = workload("adam");
  auto fused = named(p, "fuse(RS-C-AG)+asSlice(m,v)");
  fused.knobs.chunks = 4;  // the chunks knob cuts overlap groups; a fused op cuts itself in pieces
  const StepPlan cpu = lower(fused, {{"N", 37}}, 2, cpu_capabilities());
  ASSERT_EQ(cpu.units.size(), 1u);
  EXPECT_TRUE(cpu.units[0].slice_mode);
  EXPECT_EQ(cpu.units[0].chunks, 1);
  EXPECT_EQ(issue_order(cpu, cpu.units[0]).size(), 1u);
  // The same stage unfused is three whole units.
  auto parts = named(p, "RS-C-AG+asSlice(m,v)");
  parts.knobs.chunks = 4;
  const StepPlan split = lower(parts, {{"N", 37}}, 2, cpu_capabilities());
  EXPECT_EQ(split.units.size(), 3u);
  for (const Unit& u : split.units) EXPECT_EQ(u.chunks, 1) << u.name;
}

TEST(Chunks, NothingOutsideAnOverlapGroupIsCut) {
  const model::Program p = workload("adam");
  auto s = named(p, "AR-C");
  s.knobs.chunks = 4;
  for (const Unit& u : lower(s, {{"N", 37}}, 2, cpu_capabilities()).units) EXPECT_EQ(u.chunks, 1) << u.name;
}

// A fused op's program in an overlap group: on a CUDA stream beside the
// caller always; on the cpu backend's comm thread only while more of the
// unit's computation follows it (the head's latency hides behind that), on
// the caller otherwise; outside overlap groups on the compute stream.
TEST(Chunks, AnOverlappedFusedProgramRunsOnTheCommStreamOnlyWhereItHidesSomething) {
  const model::Program mlp = workload("megatron_mlp");
  auto s = named(mlp, "ol(MM,fuse(AR-C))");
  s.knobs.chunks = 3;
  const auto streams = [&](const Capabilities& caps) {
    const StepPlan plan = lower(s, mlp.params, 2, caps);
    const Unit& u = plan.units.front();
    EXPECT_TRUE(u.overlapped);
    std::vector<Stream> out;
    for (const Launch& l : issue_order(plan, u))
      if (plan.op(l.op).cls == OpClass::fused) out.push_back(fused_program_stream(plan, l));
    return out;
  };
  EXPECT_EQ(streams(cpu_capabilities()), (std::vector<Stream>{Stream::comm, Stream::comm, Stream::compute}));
  EXPECT_EQ(streams(cuda_capabilities()), (std::vector<Stream>{Stream::comm, Stream::comm, Stream::comm}));
  s.knobs.chunks = 1;  // nothing follows the one chunk
  EXPECT_EQ(streams(cpu_capabilities()), std::vector<Stream>{Stream::compute});

  const model::Program pipe = workload("gpt3_pipeline");
  const StepPlan only_comm = lower(named(pipe, "ol(AR,fuse(P2P-C))"), pipe.params, 1, cpu_capabilities());
  const Launch fused{only_comm.units.front().ops.back(), 0};
  EXPECT_EQ(fused_program_stream(only_comm, fused), Stream::compute);
  const StepPlan alone = lower(named(pipe, "AR-fuse(P2P-C)"), pipe.params, 1, cuda_capabilities());
  EXPECT_EQ(fused_program_stream(alone, {alone.units.back().ops.front(), 0}), Stream::compute);
}

TEST(Describe, NamesEveryOpAndTheBackend) {
  const model::Program p = workload("adam");
  const std::string text = describe(lower(named(p, "fuse(RS-C-AG)+asSlice(m,v)"), {{"N", 37}}, 2,
                                          cuda_capabilities()));
  EXPECT_NE(text.find("head g1.rs"), std::string::npos) << text;
  EXPECT_NE(text.find("pass 0: [m1, v1, w1.s]"), std::string::npos) << text;
  EXPECT_NE(text.find("gathers w1"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda"), std::string::npos) << text;
  EXPECT_NE(text.find("reducescatter"), std::string::npos) << text;
}

// overlap: tile lowers a matmul then the collective of its result as tile
// blocks: the unit says so, its chunks stay the collective's, and a fused
// op's program goes to the comm stream (the caller runs the GEMM throughout).
TEST(Tiles, AMatmulThenItsCollectiveLowersAsTiles) {
  const model::Program p = workload("megatron_mlp");
  for (const char* name : {"ol(MM,RS)-C-AG", "ol(MM,fuse(RS-C-AG))", "ol(MM,AR)-C", "ol(MM,fuse(AR-C))"}) {
    model::Schedule s = named(p, name);
    s.knobs.chunks = 4;
    s.knobs.overlap = model::Grain::tile;
    EXPECT_EQ(why_not_tile(s, cpu_capabilities()), "") << name;
    const StepPlan plan = lower(s, p.bind(), 2, cpu_capabilities());
    const auto tiled = std::find_if(plan.units.begin(), plan.units.end(), [](const Unit& u) { return u.tile; });
    ASSERT_NE(tiled, plan.units.end()) << name;
    EXPECT_TRUE(tiled->overlapped);
    EXPECT_EQ(tiled->chunks, 4) << name;
    EXPECT_EQ(plan.op(tiled->ops.front()).cls, OpClass::matmul);
    for (const auto& u : plan.units) {
      EXPECT_TRUE(u.overlapped || !u.tile) << name << " " << u.name;
    }
    for (int id : tiled->ops) {
      if (!plan.op(id).fused) continue;
      for (int c = 0; c < tiled->chunks; ++c) EXPECT_EQ(fused_program_stream(plan, {id, c}), Stream::comm) << name;
    }
    s.knobs.overlap = model::Grain::chunk;
    const StepPlan chunked = lower(s, p.bind(), 2, cpu_capabilities());
    EXPECT_TRUE(std::none_of(chunked.units.begin(), chunked.units.end(), [](const Unit& u) { return u.tile; }));
  }
}

// The errors of the knob: a group that is not a matmul then its collective,
// a fused collective on the cuda backend (its communication kernel runs no
// program), and a backend that runs no tiles here (a cuda group that is not
// one LSA team: the backend instance's reason quoted), each named with the
// fix; a schedule without an overlap group takes the knob and changes nothing.
// Shown to fail: with tile_fused ignored in why_not_tile, ol(MM,fuse(RS-C-AG))
// lowered for cuda; with no_tile_reason left out of the message, the reason
// was missing.
TEST(Tiles, RefusedWhereNoMatmulFeedsTheGroupsCollectiveOrTheBackendRunsNoTiles) {
  const model::Program mlp = workload("megatron_mlp");
  model::Schedule s = named(mlp, "ol(MM,fuse(RS-C-AG))");
  s.knobs.overlap = model::Grain::tile;
  try {
    (void)lower(s, mlp.bind(), 2, cuda_capabilities());
    ADD_FAILURE() << "a fused collective tiled for the cuda backend";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the cuda backend's tiles feed a plain reduce-scatter or allreduce"), std::string::npos) << msg;
    EXPECT_NE(msg.find("use overlap: chunk"), std::string::npos) << msg;
  }
  model::Schedule rs = named(mlp, "ol(MM,RS)-C-AG");
  rs.knobs.overlap = model::Grain::tile;
  EXPECT_EQ(why_not_tile(rs, cuda_capabilities()), "");
  Capabilities no_team = cuda_capabilities();
  no_team.tile_overlap = false;
  no_team.no_tile_reason = "only 4 of the group's 8 ranks share a load/store (NVLink) domain";
  try {
    (void)lower(rs, mlp.bind(), 2, no_team);
    ADD_FAILURE() << "tile lowered for a cuda group that is not one LSA team";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("overlap: tile: the cuda backend runs no tiled GEMM here: only 4 of the group's 8 ranks"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("use overlap: chunk"), std::string::npos) << msg;
  }
  const model::Program pipeline = workload("gpt3_pipeline");
  bool refused = false;
  for (auto t : model::enumerate_schedules(pipeline)) {  // ol(AR,P2P), ol(AG,fuse(P2P-C)), ...
    if (t.overlaps.empty()) continue;
    t.knobs.overlap = model::Grain::tile;
    EXPECT_NE(why_not_tile(t, cpu_capabilities()), "") << t.name();
    try {
      (void)lower(t, pipeline.bind(), 2, cpu_capabilities());
      ADD_FAILURE() << t.name() << " lowered with tiles";
    } catch (const UserError& e) {
      refused = true;
      EXPECT_NE(std::string(e.what()).find("is not a matmul then the reduce-scatter or allreduce of its result"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(refused) << "gpt3_pipeline has overlap groups without a matmul";
  model::Schedule plain = named(mlp, "MM-fuse(RS-C-AG)");
  plain.knobs.overlap = model::Grain::tile;
  const StepPlan p = lower(plain, mlp.bind(), 2, cpu_capabilities());
  EXPECT_TRUE(std::none_of(p.units.begin(), p.units.end(), [](const Unit& u) { return u.tile; }));
}

}  // namespace
}  // namespace coconet::plan
