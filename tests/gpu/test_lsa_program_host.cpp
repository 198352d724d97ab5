// The host side of the generated single-kernel fused op over an LSA team
// (kernels/cuda/lsa_program_plan.h, exec/cuda/lsa_fused_choice.h): operand
// roles checked against the program, the shard and the 16-byte vector head
// planned for the launch, and which fused ops of the workloads take the
// single kernel. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exec/cuda/lsa_fused_choice.h"
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
kernels::ElementwiseProgram momentum_program() {
  const std::vector<kernels::ElementwiseStmt> stmts{
      {"m1", model::parse_expr("0.9 * m + g"), DType::f32},
      {"w1", model::parse_expr("w - 0.1 * m1"), DType::f32}};
  return kernels::compile_elementwise(
      stmts, {{"g", DType::f16}, {"m", DType::f32}, {"w", DType::f32}}, {});
}

// Places for the program's inputs: g reduced, the others local at `local`.
std::vector<LsaOperandPlace> input_places(const kernels::ElementwiseProgram& p,
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
  const auto r1 = kc::plan_lsa_launch(p, ins, outs, 37, 2, 1);
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
  EXPECT_EQ(kc::plan_lsa_launch(p, input_places(p, kAligned + 12), outs, 37, 2, 1).vec_head, 5);
  // Local operands on a boundary need a head that is a multiple of 4: no head of < 8 fits both.
  const std::vector<LsaOperandPlace> outs0{{LsaRole::local, kAligned}, {LsaRole::gathered, 0}};
  EXPECT_EQ(kc::plan_lsa_launch(p, input_places(p, kAligned), outs0, 37, 2, 1).vec_head, -1);
  // Rank 0 starts at 0: no head.
  EXPECT_EQ(kc::plan_lsa_launch(p, input_places(p, kAligned), outs0, 37, 2, 0).vec_head, 0);
  // A gathered output's local copy counts too.
  const std::vector<LsaOperandPlace> copy{{LsaRole::local, kAligned},
                                          {LsaRole::gathered, kAligned + 4}};
  EXPECT_EQ(kc::plan_lsa_launch(p, input_places(p, kAligned), copy, 37, 2, 0).vec_head, -1);
}

TEST(LsaProgramPlan, MisplacedRolesAreRefusedWithTheReason) {
  const auto p = momentum_program();
  const auto ins = input_places(p, kAligned);
  const std::vector<LsaOperandPlace> outs{{LsaRole::local, kAligned}, {LsaRole::gathered, 0}};
  auto refused = [&](std::vector<LsaOperandPlace> i, std::vector<LsaOperandPlace> o, std::int64_t n,
                     int size, int rank, const std::string& part) {
    try {
      (void)kc::plan_lsa_launch(p, i, o, n, size, rank);
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

model::Schedule named(const model::Program& p, const std::string& name) {
  for (auto& s : model::enumerate_schedules(p))
    if (s.name() == name) return s;
  ADD_FAILURE() << p.name << " has no schedule " << name;
  return model::initial_schedule(p);
}

const plan::Op& only_fused_op(const plan::StepPlan& plan) {
  for (const auto& op : plan.ops)
    if (op.fused) return op;
  throw InternalError("no fused op in the plan");
}

TEST(LsaFusedChoice, AdamWithSlicedMomentsTakesTheSingleKernel) {
  const model::Program p = model::load_program(model::resolve_workload("adam"));
  for (int ranks : {1, 2}) {
    const auto plan = plan::lower(named(p, "fuse(RS-C-AG)+asSlice(m,v)"), {{"N", 37}}, ranks,
                                  plan::cuda_capabilities());
    const plan::FusedForm& form = *only_fused_op(plan).fused;
    std::string why;
    const auto roles = exec::cuda::lsa_single_kernel(form, plan.program, why);
    ASSERT_TRUE(roles.has_value()) << why;
    const auto& prog = form.passes[0].program;
    for (std::size_t k = 0; k < prog.input_names.size(); ++k) {
      const bool head = prog.input_names[k] == "g1.rs";
      EXPECT_EQ(roles->inputs[k], head ? LsaRole::reduced : LsaRole::local) << prog.input_names[k];
      EXPECT_EQ(roles->input_windows[k], head ? "g" : "") << prog.input_names[k];
    }
    for (std::size_t k = 0; k < prog.output_names.size(); ++k) {
      const bool weights = prog.output_names[k] == "w1.s";
      EXPECT_EQ(roles->outputs[k], weights ? LsaRole::gathered : LsaRole::local)
          << prog.output_names[k];
      EXPECT_EQ(roles->output_windows[k], weights ? "w1" : "") << prog.output_names[k];
    }
  }
}

TEST(LsaFusedChoice, NormPhasesAndSendHeadsKeepTheHostPath) {
  const model::Program lamb = model::load_program(model::resolve_workload("lamb"));
  const auto plan = plan::lower(named(lamb, "fuse(RS-C-AG)+asSlice(m,v)"), {{"N", 37}}, 2,
                                plan::cuda_capabilities());
  std::string why;
  EXPECT_FALSE(
      exec::cuda::lsa_single_kernel(*only_fused_op(plan).fused, plan.program, why).has_value());
  EXPECT_NE(why.find("norm phase"), std::string::npos) << why;
  // Every fused op of every workload: accepted ones read one reduced input;
  // refused ones say why. Send heads are never accepted.
  int accepted = 0, refused = 0;
  for (const char* w :
       {"sgd", "adam", "lamb", "megatron_mlp", "megatron_attention", "gpt3_pipeline"}) {
    const model::Program p = model::load_program(model::resolve_workload(w));
    for (const auto& s : model::enumerate_schedules(p)) {
      const auto sizes = p.params.contains("N") ? model::Bindings{{"N", 37}}
                                                : model::Bindings{{"B", 1}, {"S", 3}, {"H", 5}};
      const auto pl = plan::lower(s, sizes, 2, plan::cuda_capabilities());
      for (const auto& op : pl.ops) {
        if (!op.fused) continue;
        const auto roles = exec::cuda::lsa_single_kernel(*op.fused, pl.program, why);
        const model::Stmt* head = pl.program.find_stmt(op.fused->head);
        if (!roles) {
          ++refused;
          EXPECT_FALSE(why.empty()) << w << " " << s.name();
          continue;
        }
        ++accepted;
        EXPECT_NE(head->op, model::OpKind::send) << w << " " << s.name();
        EXPECT_EQ(std::count(roles->inputs.begin(), roles->inputs.end(), LsaRole::reduced), 1)
            << w << " " << s.name();
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

// Every fused schedule of sgd (the GPU test runs them all through the single kernel).
TEST(LsaFusedChoice, EveryFusedSgdScheduleTakesTheSingleKernel) {
  const model::Program p = model::load_program(model::resolve_workload("sgd"));
  int fused = 0;
  for (const auto& s : model::enumerate_schedules(p)) {
    if (s.name().find("fuse(") == std::string::npos) continue;
    for (int ranks : {1, 2}) {
      const auto plan = plan::lower(s, {{"N", 37}}, ranks, plan::cuda_capabilities());
      std::string why;
      EXPECT_TRUE(exec::cuda::lsa_single_kernel(*only_fused_op(plan).fused, plan.program, why).has_value())
          << s.name() << " on " << ranks << " ranks: " << why;
      ++fused;
    }
  }
  EXPECT_GT(fused, 0);
}

}  // namespace
}  // namespace coconet
