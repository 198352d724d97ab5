// exec/update_in_place.h: which updates a rank writes over the state they
// update (Adam's m1, v1, w1 over m, v, w, whole or this rank's slice, and
// the gathers of sliced ones), which it must not (the old state still read
// after the update), and the program order check; and what that, with the
// reference held once per node, makes check_memory ask of BERT-large Adam
// and LAMB on 2 ranks of one machine.
#include <gtest/gtest.h>

#include <string>

#include "dry_backend.h"
#include "exec/rank_values.h"
#include "exec/runtime.h"
#include "exec/update_in_place.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "plan/capabilities.h"

namespace coconet::exec {
namespace {

constexpr std::int64_t kN = 1000;

model::Program adam() { return model::load_program(model::resolve_workload("adam")); }

std::map<std::string, InPlace> in_place_of(const model::Program& p, int position,
                                           std::int64_t n = kN) {
  return RankValues(p, {{"N", n}}, 2, 0, position, {}, true).in_place();
}

TEST(UpdateInPlace, AdamsUpdatesOverwriteTheirState) {
  const auto got = in_place_of(adam(), 1);
  ASSERT_EQ(got.size(), 3u);
  for (const auto& [value, target] :
       std::map<std::string, std::string>{{"m1", "m"}, {"v1", "v"}, {"w1", "w"}}) {
    ASSERT_TRUE(got.contains(value)) << value;
    EXPECT_EQ(got.at(value).target, target);
    EXPECT_EQ(got.at(value).offset, 0);
  }
}

// RS-C-AG: each rank's sliced update over its slice of the replicated state
// (rank 1's starts half way), and the gather of it over the whole state.
TEST(UpdateInPlace, SlicedUpdatesOverwriteTheRanksSliceAndTheirGatherTheWhole) {
  const auto p = adam();
  const auto s = model::find_schedule(p, "RS-C-AG");
  for (int position : {0, 1}) {
    const auto got = in_place_of(s.program, position);
    ASSERT_TRUE(got.contains("w1.s") && got.contains("w1")) << position;
    EXPECT_EQ(got.at("w1.s").target, "w");
    EXPECT_EQ(got.at("w1.s").offset, position * kN / 2);
    EXPECT_EQ(got.at("w1").offset, 0);
  }
  const RankValues values(s.program, {{"N", kN}}, 2, 0, 1, {}, true);
  EXPECT_EQ(values.overwritten_inputs(), (std::set<std::string>{"m", "v", "w"}));
  // Every input but the gradient's and the sliced gradient itself, and nothing of the updates: held
  // in place.
  EXPECT_EQ(values.bytes(), 2 * kN + kN + 3 * 4 * kN);
  EXPECT_EQ(RankValues(s.program, {{"N", kN}}, 2, 0, 1).bytes(),
            2 * kN + kN + 3 * 4 * kN + 3 * 6 * kN);
}

// A statement that reads w's old values and does not feed w1 may run after
// w1 is written: w1 then needs a buffer of its own.
TEST(UpdateInPlace, AnUpdateWhoseStateIsReadAfterItKeepsABuffer) {
  const auto p = model::parse_program(
      "name: late\nparams: {N: 8}\ntensors:\n  g: {dtype: f32, shape: [N], layout: local}\n"
      "  w: {dtype: f32, shape: [N], layout: replicated}\nprogram:\n  - g1 = allreduce(sum, g)\n"
      "  - w1 = update(w, w - g1)\n  - d = w1 - w\noutputs: [w1, d]\n",
      "<test>");
  EXPECT_TRUE(in_place_of(p, 0, 8).empty());
}

// A program that loads the state after it stored the update is refused.
TEST(UpdateInPlace, AProgramThatReadsTheStateAfterWritingItIsRefused) {
  model::ElementwiseProgram program;
  program.input_names = {"w"};
  program.input_types = {model::DType::f32};
  program.output_names = {"w1"};
  program.output_types = {model::DType::f32};
  const auto instr = [](model::OpCode c) {
    model::Instr i;
    i.code = c;
    return i;
  };
  program.code = {instr(model::OpCode::load), instr(model::OpCode::store),
                  instr(model::OpCode::load), instr(model::OpCode::store)};
  const std::map<std::string, InPlace> w1_over_w{{"w1", InPlace{"w", 0}}};
  EXPECT_THROW(check_reads_before_writes(program, w1_over_w), InternalError);
  program.code.resize(2);
  EXPECT_NO_THROW(check_reads_before_writes(program, w1_over_w));
}

// The bytes check_memory asks of a rank, from its refusal at 1 byte.
double needed_gib(const model::Program& p, bool in_place, std::vector<int> node) {
  testing::DryBackend backend(0, 2, plan::cpu_capabilities());
  backend.set_groups(1);
  backend.write_updates_in_place(in_place);
  backend.set_node_ranks(std::move(node));
  backend.set_available_bytes(1);
  RunOptions options;
  options.interpreter_limit = 0;
  try {
    check_memory(backend, p, model::enumerate_schedules(p), p.params, options);
  } catch (const UserError& e) {
    const std::string m = e.what();
    const auto at = m.find(" needs ");
    return std::stod(m.substr(at + 7));
  }
  ADD_FAILURE() << p.name << " fitted in 1 byte";
  return 0;
}

double needed_gib(const std::string& workload, bool in_place, std::vector<int> node) {
  return needed_gib(model::load_program(model::resolve_workload(workload)), in_place, std::move(node));
}

// N = 335,708,160 on 2 ranks of one node. Adam: its largest plan (RS-AG-C:
// g, g1 in f16, g1's slice, w, m, v in f32) 17 bytes an element, and half of
// the 12 of the reference's w1, m1, v1; before, RS-C-AG's 33 and all 12:
// 7.2 against 14.1 GiB. LAMB adds u (f32) to the largest plan: 8.4 against 14.7.
TEST(UpdateInPlace, BertLargeAdamAndLambFitTwoRanksOfTheMachine) {
  EXPECT_NEAR(needed_gib("adam", true, {0, 1}), 7.2, 0.05);
  EXPECT_NEAR(needed_gib("adam", false, {0}), 14.1, 0.05);
  EXPECT_NEAR(needed_gib("lamb", true, {0, 1}), 8.4, 0.05);
  EXPECT_NEAR(needed_gib("lamb", false, {0}), 14.7, 0.05);
  // In place but one rank a node: the whole reference on each.
  EXPECT_NEAR(needed_gib("adam", true, {0}), 9.1, 0.05);
}

// A replicated output's reference is held once a node, a local one's (each
// rank's own values) by every rank: y = 2 x over 2^28 f32 elements, x and y
// 1 GiB each, the reference 1 GiB a copy.
TEST(UpdateInPlace, ALocalOutputsReferenceIsEachRanksOwn) {
  const auto program = [](const char* layout) {
    return model::parse_program(std::string("name: twice\nparams: {N: 268435456}\ntensors:\n"
                                            "  x: {dtype: f32, shape: [N], layout: ") +
                                    layout + "}\nprogram:\n  - y = x * 2\noutputs: [y]\n",
                                "<test>");
  };
  EXPECT_NEAR(needed_gib(program("replicated"), true, {0, 1}), 2.5, 0.05);
  EXPECT_NEAR(needed_gib(program("replicated"), true, {0}), 3.0, 0.05);
  EXPECT_NEAR(needed_gib(program("local"), true, {0, 1}), 3.0, 0.05);
}

}  // namespace
}  // namespace coconet::exec
