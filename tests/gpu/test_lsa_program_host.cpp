// The host side of the generated single-kernel fused op over an LSA team
// (kernels/cuda/lsa_program_plan.h, exec/cuda/lsa_fused_call.h): operand
// roles checked against the program, the shard and the 16-byte vector head
// planned for the launch, and which fused ops of the workloads take the
// single kernel. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "../unit/dry_backend.h"
#include "exec/cuda/lsa_fused_call.h"
#include "exec/fused_builder.h"
#include "exec/rank_values.h"
#include "kernels/cuda/lsa_program_plan.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "model/program.h"
#include "plan/step_plan.h"

namespace coconet {
namespace {

namespace kc = kernels::cuda;
using kc::LsaOperandPlace;
using kc::LsaRole;
using model::DType;

// m1 = 0.9 m + g; w1 = w - 0.1 m1: inputs in slot order as compiled.
model::ElementwiseProgram momentum_program() {
  const std::vector<model::ElementwiseStmt> stmts{
      {"m1", model::parse_expr("0.9 * m + g"), DType::f32},
      {"w1", model::parse_expr("w - 0.1 * m1"), DType::f32}};
  return model::compile_elementwise(
      stmts, {{"g", DType::f16}, {"m", DType::f32}, {"w", DType::f32}}, {});
}

// Places for the program's inputs: g reduced, the others local at `local`.
std::vector<LsaOperandPlace> input_places(const model::ElementwiseProgram& p,
                                          std::uintptr_t local) {
  std::vector<LsaOperandPlace> out;
  for (const auto& name : p.input_names)
    out.push_back(name == "g" ? LsaOperandPlace{LsaRole::reduced, 0}
                              : LsaOperandPlace{LsaRole::local, local});
  return out;
}

constexpr std::uintptr_t kAligned = 0x1000;  // a 16-byte aligned local address

TEST(LsaProgramPlan, ShardFollowsTheSliceRule) {
  const auto p = momentum_program();
  const auto ins = input_places(p, kAligned);
  const std::vector<LsaOperandPlace> outs{{LsaRole::local, kAligned}, {LsaRole::gathered, 0}};
  const auto r1 = kc::plan_lsa_shard(p, ins, outs, 37, 2, 1);
  EXPECT_EQ(r1.shard.begin, 19);
  EXPECT_EQ(r1.shard.size, 18);
  EXPECT_EQ(kc::reduced_slot(ins), int(std::find(p.input_names.begin(), p.input_names.end(), "g") -
                                       p.input_names.begin()));
}

// Rank 1 of 2 over 37 elements starts at element 19: the windows (f16 g, f32
// w1) reach a 16-byte boundary after a head of 5 elements (24 * 2 and
// 24 * 4 bytes); local operands must agree, or every element is scalar.
TEST(LsaProgramPlan, VectorHeadAlignsEveryOperandOrNone) {
  const auto p = momentum_program();
  // Local f32 operands 12 bytes past a boundary: 5 elements (20 bytes) + 12 = 32.
  const std::vector<LsaOperandPlace> outs{{LsaRole::local, kAligned + 12}, {LsaRole::gathered, 0}};
  EXPECT_EQ(kc::plan_lsa_shard(p, input_places(p, kAligned + 12), outs, 37, 2, 1).vec_head, 5);
  // Local operands on a boundary need a head that is a multiple of 4: no head of < 8 fits both.
  const std::vector<LsaOperandPlace> outs0{{LsaRole::local, kAligned}, {LsaRole::gathered, 0}};
  EXPECT_EQ(kc::plan_lsa_shard(p, input_places(p, kAligned), outs0, 37, 2, 1).vec_head, -1);
  // Rank 0 starts at 0: no head.
  EXPECT_EQ(kc::plan_lsa_shard(p, input_places(p, kAligned), outs0, 37, 2, 0).vec_head, 0);
  // A gathered output's local copy counts too.
  const std::vector<LsaOperandPlace> copy{{LsaRole::local, kAligned},
                                          {LsaRole::gathered, kAligned + 4}};
  EXPECT_EQ(kc::plan_lsa_shard(p, input_places(p, kAligned), copy, 37, 2, 0).vec_head, -1);
}

TEST(LsaProgramPlan, MisplacedRolesAreRefusedWithTheReason) {
  const auto p = momentum_program();
  const auto ins = input_places(p, kAligned);
  const std::vector<LsaOperandPlace> outs{{LsaRole::local, kAligned}, {LsaRole::gathered, 0}};
  auto refused = [&](std::vector<LsaOperandPlace> i, std::vector<LsaOperandPlace> o, std::int64_t n,
                     int size, int rank, const std::string& part) {
    try {
      (void)kc::plan_lsa_shard(p, i, o, n, size, rank);
      ADD_FAILURE() << "accepted; expected a refusal naming '" << part << "'";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  std::vector<LsaOperandPlace> none = ins, two = ins, gathered_in = ins;
  for (auto& o : none) o.role = LsaRole::local;
  for (auto& o : two) o.role = LsaRole::reduced;
  gathered_in[0].role = LsaRole::gathered;
  refused(none, outs, 37, 2, 0, "exactly one reduced input");
  refused(two, outs, 37, 2, 0, "exactly one reduced input");
  refused(gathered_in, outs, 37, 2, 0, "cannot be gathered");
  refused(ins, {{LsaRole::reduced, 0}, {LsaRole::gathered, 0}}, 37, 2, 0, "cannot be reduced");
  refused(ins, {{LsaRole::gathered, 0}}, 37, 2, 0, "operand count");
  refused(ins, outs, 37, 2, 2, "not a valid split");
  refused(ins, outs, -1, 2, 0, "not a valid split");
}

const plan::Op& only_fused_op(const plan::StepPlan& plan) {
  for (const auto& op : plan.ops)
    if (op.fused) return op;
  throw InternalError("no fused op in the plan");
}

// ---- a FusedCall as one single-kernel launch (lsa_fused_call.h)

// Buffers of the hand-made calls below and their dtypes.
enum Buf : exec::BufferId { kG, kHeadOut, kM, kW, kM1, kW1, kBufs };
DType buffer_dtype(exec::BufferId b) { return b == kG || b == kHeadOut ? DType::f16 : DType::f32; }

exec::Operand column(exec::BufferId b, std::int64_t base) { return {b, {base, 1, 0}}; }

int slot_of(const std::vector<std::string>& names, const std::string& name) {
  return int(std::find(names.begin(), names.end(), name) - names.begin());
}

// Rank 1 of 2 over 37 elements: reduce-scatter g into a scratch shard, the
// momentum program over the shard (m sliced, w whole), w1 gathered in place.
exec::FusedCall rs_call(const model::ElementwiseProgram& prog) {
  exec::FusedPiece piece;
  exec::HeadCall h{exec::HeadCall::Kind::reduce_scatter,
                   model::ReduceOp::sum,
                   {{kG, 0, 19}, {kG, 19, 18}},
                   {kHeadOut, 0, 18},
                   -1};
  piece.heads.push_back(h);
  exec::ElementwiseCall c{&prog, {}, {}, model::Block{18, 1, 19, 0, 1}};
  for (const auto& name : prog.input_names)
    c.inputs.push_back(name == "g"   ? column(kHeadOut, 0)
                       : name == "m" ? column(kM, 0)
                                     : column(kW, 19));
  for (const auto& name : prog.output_names)
    c.outputs.push_back(name == "m1" ? column(kM1, 0) : column(kW1, 19));
  piece.computes.push_back(c);
  piece.gathers.push_back({{kW1, 19, 18}, {{kW1, 0, 19}, {kW1, 19, 18}}});
  exec::FusedCall call;
  call.passes.push_back({{piece}, {}});
  return call;
}

std::optional<exec::cuda::LsaCallPlan> plan_call(const exec::FusedCall& call, std::string& why) {
  return exec::cuda::plan_lsa_call(call, 1, 2, buffer_dtype, why);
}

TEST(LsaFusedCall, ReduceScatterCallStagesTheGradientAndTheGatheredWeights) {
  const auto prog = momentum_program();
  std::string why;
  const auto p = plan_call(rs_call(prog), why);
  ASSERT_TRUE(p.has_value()) << why;
  EXPECT_EQ(p->n, 37);
  EXPECT_EQ(p->global_first, 0);
  EXPECT_EQ(p->reduced_source.buffer, kG);
  EXPECT_EQ(p->reduced_source.count, 37);
  const int g = slot_of(prog.input_names, "g"), m = slot_of(prog.input_names, "m"),
            w = slot_of(prog.input_names, "w");
  EXPECT_EQ(p->in_roles[g], LsaRole::reduced);
  EXPECT_EQ(p->in_roles[m], LsaRole::local);
  EXPECT_EQ(p->in_local[m].offset, 0);
  EXPECT_EQ(p->in_local[w].buffer, kW);
  EXPECT_EQ(p->in_local[w].offset, 19);  // w is whole: this rank's shard starts at 19
  EXPECT_EQ(p->in_local[w].count, 18);
  const int m1 = slot_of(prog.output_names, "m1"), w1 = slot_of(prog.output_names, "w1");
  EXPECT_EQ(p->out_roles[m1], LsaRole::local);
  EXPECT_EQ(p->out_roles[w1], LsaRole::gathered);
  EXPECT_EQ(p->out_local[w1].count, 0);  // gathered in place: the copy out covers the shard too
  EXPECT_EQ(p->out_dest[w1].buffer, kW1);
  EXPECT_EQ(p->out_dest[w1].count, 37);
  EXPECT_EQ(p->reduced_slot, static_cast<std::size_t>(g));
}

TEST(LsaFusedCall, AllreduceCallGathersEveryOutputIntoItself) {
  const auto prog = momentum_program();
  exec::FusedPiece piece;
  piece.heads.push_back({exec::HeadCall::Kind::allreduce,
                         model::ReduceOp::sum,
                         {{kG, 0, 37}},
                         {kHeadOut, 0, 37},
                         -1});
  exec::ElementwiseCall c{&prog, {}, {}, model::Block{37, 1, 0, 0, 1}};
  for (const auto& name : prog.input_names)
    c.inputs.push_back(column(name == "g" ? kHeadOut : name == "m" ? kM : kW, 0));
  for (const auto& name : prog.output_names)
    c.outputs.push_back(column(name == "m1" ? kM1 : kW1, 0));
  piece.computes.push_back(c);
  exec::FusedCall call;
  call.passes.push_back({{piece}, {}});
  std::string why;
  const auto p = plan_call(call, why);
  ASSERT_TRUE(p.has_value()) << why;
  const int m = slot_of(prog.input_names, "m");
  EXPECT_EQ(p->in_local[m].offset,
            19);  // the block covers the whole range: the shard is read at 19
  for (std::size_t k = 0; k < prog.output_names.size(); ++k) {
    EXPECT_EQ(p->out_roles[k], LsaRole::gathered);
    EXPECT_EQ(p->out_dest[k].count, 37);
  }
}

TEST(LsaFusedCall, OtherShapesKeepTheHostPath) {
  const auto prog = momentum_program();
  auto refused = [&](exec::FusedCall call, const std::string& part) {
    std::string why;
    EXPECT_FALSE(plan_call(call, why).has_value()) << "expected a refusal naming '" << part << "'";
    EXPECT_NE(why.find(part), std::string::npos) << why;
  };
  auto two_pieces = rs_call(prog);
  two_pieces.passes[0].pieces.push_back(two_pieces.passes[0].pieces[0]);
  refused(two_pieces, "several pieces");
  auto norm = rs_call(prog);
  norm.norms_before.push_back({{kW, 0, 37}, {kM, 0, 1}, false});
  refused(norm, "norm phase");
  auto swapped = rs_call(prog);
  std::swap(swapped.passes[0].pieces[0].heads[0].in[0], swapped.passes[0].pieces[0].heads[0].in[1]);
  refused(swapped, "reduce-scatter parts");
  auto strided = rs_call(prog);
  strided.passes[0].pieces[0].computes[0].inputs[0].access.row_stride = 2;
  refused(strided, "strided");
  auto stray = rs_call(prog);
  stray.passes[0].pieces[0].gathers.push_back({{kM, 0, 18}, {{kM, 0, 19}, {kM, 19, 18}}});
  refused(stray, "allgather");
  auto send = rs_call(prog);
  send.passes[0].pieces[0].heads[0].kind = exec::HeadCall::Kind::send;
  refused(send, "not a reduce-scatter");
}

// The runtime's own calls (exec/fused_builder.h) for adam's and sgd's fused
// schedules on 2 ranks take the single kernel on both positions.
TEST(LsaFusedCall, TheBuildersCallsForAdamAndSgdTakeIt) {
  int planned = 0;
  for (const char* w : {"adam", "sgd"}) {
    const model::Program p = model::load_program(model::resolve_workload(w));
    for (const auto& s : model::enumerate_schedules(p)) {
      if (s.name().find("fuse(") == std::string::npos) continue;
      const auto plan = plan::lower(s, {{"N", 37}}, 2, plan::cuda_capabilities());
      for (int position : {0, 1}) {
        exec::testing::DryBackend dry(position, 2, plan::cuda_capabilities());
        dry.set_groups(1);
        exec::RankValues values(*plan.program, {{"N", 37}}, 2, 0, position,
                                exec::fused_scratch_values(plan));
        values.allocate(dry);
        const auto calls = exec::build_fused_calls(dry, plan, only_fused_op(plan), values);
        EXPECT_FALSE(calls.chunks.empty()) << w << " " << s.name() << " position " << position;
        for (const auto& call : calls.chunks) {
          std::string why;
          const auto lp = exec::cuda::plan_lsa_call(
              call, position, 2, [&](exec::BufferId b) { return dry.dtype_of(b); }, why);
          EXPECT_TRUE(lp.has_value())
              << w << " " << s.name() << " position " << position << ": " << why;
          if (lp) {
            EXPECT_EQ(std::count(lp->in_roles.begin(), lp->in_roles.end(), LsaRole::reduced), 1);
          }
          ++planned;
        }
      }
    }
  }
  EXPECT_GT(planned, 0);
}

// The kernel, the device communicator and the windows are collective: every
// position of the group must decide alike, for every fused op of every
// workload (the Megatron epilogues' broadcast bias and LAMB's norms keep the
// host path on all of them).
TEST(LsaFusedCall, EveryPositionDecidesAlike) {
  int taken = 0, refused = 0;
  for (const char* w : {"sgd", "adam", "lamb", "megatron_mlp", "megatron_attention"}) {
    const model::Program p = model::load_program(model::resolve_workload(w));
    model::Bindings small;
    for (const auto& [k, v] : p.params)
      small[k] = k == "N" ? 37 : k == "S" ? 16 : k == "H" ? 64 : std::min<std::int64_t>(v, 2);
    const model::Bindings sizes = p.bind(small);
    for (const auto& s : model::enumerate_schedules(p)) {
      const auto plan = plan::lower(s, sizes, 2, plan::cuda_capabilities());
      for (const auto& op : plan.ops) {
        if (!op.fused) continue;
        std::vector<std::string> outcome(2);
        for (int position : {0, 1}) {
          exec::testing::DryBackend dry(position, 2, plan::cuda_capabilities());
          dry.set_groups(1);
          exec::RankValues values(*plan.program, sizes, 2, 0, position,
                                  exec::fused_scratch_values(plan));
          values.allocate(dry);
          for (const auto& call : exec::build_fused_calls(dry, plan, op, values).chunks) {
            std::string why;
            const auto lp = exec::cuda::plan_lsa_call(
                call, position, 2, [&](exec::BufferId b) { return dry.dtype_of(b); }, why);
            outcome[static_cast<std::size_t>(position)] += (lp ? "taken" : why) + ";";
          }
        }
        EXPECT_FALSE(outcome[0].empty()) << w << " " << s.name();
        EXPECT_EQ(outcome[0], outcome[1]) << w << " " << s.name();
        (outcome[0].find("taken") != std::string::npos ? taken : refused) += 1;
      }
    }
  }
  EXPECT_GT(taken, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace coconet
