// The defining property of every transformation (after CuTe's tests of
// transforms): for every workload, every enumerated schedule computes the same
// outputs as the unscheduled program in the reference interpreter, for P in
// {1, 2, 3, 4, 8} ranks per group and sizes that P does and does not divide.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <set>
#include <span>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/builder.h"
#include "model/enumerate.h"
#include "model/interpreter.h"
#include "model/kernel_fusion.h"
#include "model/parse.h"
#include "unit/test_sched_util.h"
#include "tests/paths.h"

namespace coconet::model {
namespace {

using sched_test::small_sizes;
using sched_test::workload;
using sched_test::workload_names;

constexpr int kRankCounts[] = {1, 2, 3, 4, 8};
constexpr int kOneToFour[] = {1, 2, 3, 4};

std::string describe(const std::vector<Mismatch>& ms) {
  std::string out;
  for (const auto& m : ms)
    out += fmt::format("{}[{}]: expected {} got {}\n", m.tensor, m.index, m.expected, m.actual);
  return out;
}

std::string sizes_text(const Bindings& b) {
  std::string out;
  for (const auto& [k, v] : b) out += fmt::format("{}={} ", k, v);
  return out;
}

// Every schedule of `p` computes the program's outputs at each of `sizes`
// for each rank count in `ranks`.
void expect_every_schedule_equal(const Program& p, const std::vector<Schedule>& schedules,
                                 const std::vector<Bindings>& sizes, std::span<const int> ranks) {
  for (const auto& given : sizes) {
    const Bindings b = p.bind(given);
    for (int r : ranks) {
      const State in = make_inputs(p, r, b);
      const State expected = interpret(p, r, b, in);
      for (const auto& s : schedules) {
        SCOPED_TRACE(fmt::format("{} {} P={} sizes {}", p.name, s.name(), r, sizes_text(b)));
        const auto mismatches = compare_outputs(p, expected, interpret(s, r, b, in), r);
        EXPECT_TRUE(mismatches.empty()) << describe(mismatches);
      }
    }
  }
}

// Every schedule with the kernel choices a step prices (model/kernel_fusion.h):
// fused kernels and flash attention change stages, not statements.
std::vector<Schedule> with_kernel_choices(const std::vector<Schedule>& schedules) {
  std::vector<Schedule> out;
  for (const auto& s : schedules)
    for (auto& k : kernel_choices(s, std::string(kCausalMask))) out.push_back(std::move(k));
  return out;
}

// The programs `coconet step` tunes: every schedule of workload `name` with
// its kernel choices (more than `fewest` of them) equals the program at each
// of `sizes` for P in {1, 2, 4}.
void expect_every_tuned_schedule_equal(const std::string& name, const std::vector<Bindings>& sizes,
                                       std::size_t fewest = 4) {
  const Program p = workload(name);
  const auto schedules = with_kernel_choices(enumerate_schedules(p));
  EXPECT_GT(schedules.size(), fewest);
  constexpr int kRanks[] = {1, 2, 4};
  expect_every_schedule_equal(p, schedules, sizes, kRanks);
}

class Equivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(Equivalence, EveryScheduleComputesTheOriginalOutputs) {
  const Program p = workload(GetParam());
  expect_every_schedule_equal(p, enumerate_schedules(p), small_sizes(p), kRankCounts);
}

INSTANTIATE_TEST_SUITE_P(Workloads, Equivalence, ::testing::ValuesIn(workload_names()),
                         [](const auto& info) { return info.param; });

// Programs beyond the workloads, each stressing one rule: two allreduces
// transformed independently, a 2-D value with a broadcast bias and a norm of
// the moved value, and a max reduction.
std::vector<Program> extra_programs() {
  std::vector<Program> out;
  out.push_back(ProgramBuilder("two_buckets")
                    .param("N", 13)
                    .param("M", 5)
                    .scalar("lr", 0.25)
                    .tensor("g", DType::f16, {"N"}, Layout::local())
                    .tensor("h", DType::f16, {"M"}, Layout::local())
                    .tensor("w", DType::f32, {"N"}, Layout::replicated())
                    .tensor("u", DType::f32, {"M"}, Layout::replicated(), 0, true)
                    .stmt("g1 = allreduce(sum, g)")
                    .stmt("h1 = allreduce(sum, h)")
                    .stmt("w1 = update(w, w - lr*g1)")
                    .stmt("u1 = update(u, u - lr*h1*h1)")
                    .output("w1")
                    .output("u1")
                    .build());
  out.push_back(ProgramBuilder("bias_norm")
                    .param("R", 7)
                    .param("C", 3)
                    .tensor("x", DType::f32, {"R", "C"}, Layout::local())
                    .tensor("b", DType::f32, {"C"}, Layout::replicated())
                    .stmt("y = allreduce(sum, x)")
                    .stmt("z = dropout(y + b, 0.25)")
                    .stmt("n = norm(z)")
                    .stmt("out = z / (n + 1)")
                    .output("out")
                    .output("z")
                    .build());
  out.push_back(ProgramBuilder("max_reduce")
                    .param("N", 11)
                    .tensor("x", DType::f32, {"N"}, Layout::local())
                    .tensor("s", DType::f32, {"N"}, Layout::replicated())
                    .stmt("y = allreduce(max, x)")
                    .stmt("out = max(y, s) * 2")
                    .output("out")
                    .build());
  return out;
}

TEST(EquivalenceExtra, EveryScheduleOfMorePrograms) {
  for (const Program& p : extra_programs()) {
    const auto schedules = enumerate_schedules(p);
    EXPECT_GT(schedules.size(), 2u) << p.name;
    expect_every_schedule_equal(p, schedules, {Bindings{}}, kRankCounts);
  }
}

// The tests-only transformer workload (issue 16): LayerNorm, GELU and a row
// softmax written with rowsum and rowmax after a Megatron MLP output, and a
// row sum over a sliced dimension completed by an allreduce. Every schedule
// (the allreduces split, the LayerNorm moved onto row slices, fused and
// overlapped stages) equals the program, for P in {1, 2, 3, 4}.
TEST(EquivalenceTransformer, EveryScheduleOfLayerNormAndSoftmax) {
  const Program p = load_program(coconet::test::source_root() + "/tests/workloads/layernorm_softmax.yaml");
  const auto schedules = enumerate_schedules(p);
  EXPECT_GT(schedules.size(), 8u);
  // Some schedule runs the row reductions on the slices of a reduce-scatter.
  EXPECT_TRUE(std::any_of(schedules.begin(), schedules.end(), [](const Schedule& s) {
    const Stmt* mu = s.program.find_stmt("s.s");
    return mu != nullptr && mu->op == OpKind::rowreduce && mu->type.layout == Layout::sliced(0);
  }));
  expect_every_schedule_equal(p, schedules, small_sizes(p), kOneToFour);
}

// The transformer layer (issue 16): attention core as batched matmuls over
// heads sliced across ranks, row softmax, the output projection and MLP with
// their allreduces, LayerNorm with rowsum, GELU. Every schedule (allreduces
// split, LayerNorm moved onto row slices, fused and overlapped stages) equals
// the program for P in {1, 2, 3, 4}, at sizes the ranks do not divide (3
// heads over 2 and 4 ranks, hidden 6 over 4) and at sizes they do.
TEST(EquivalenceTransformer, EveryScheduleOfTheTransformerLayer) {
  const Program p = workload("transformer_layer");
  const auto schedules = enumerate_schedules(p);
  EXPECT_GT(schedules.size(), 50u);
  // Some schedule runs the LayerNorm's row sums on the slices of a reduce-scatter.
  EXPECT_TRUE(std::any_of(schedules.begin(), schedules.end(), [](const Schedule& s) {
    const Stmt* mu = s.program.find_stmt("s.s");
    return mu != nullptr && mu->op == OpKind::rowreduce && mu->type.layout == Layout::sliced(0);
  }));
  expect_every_schedule_equal(p, schedules,
                              {Bindings{{"B", 1}, {"S", 3}, {"NH", 3}, {"D", 2}},
                               Bindings{{"B", 2}, {"S", 4}, {"NH", 4}, {"D", 2}}},
                              kOneToFour);
}

// The layer forward and backward `coconet step` prices through the tuner
// (workloads/megatron_layer_*.yaml; issue 16): LayerNorms, QKV, attention
// core, projection and MLP forward; dgrad and wgrad GEMMs, GELU, LayerNorm and
// softmax backward; with allreduces (tensor parallel) or all-gathers and
// reduce-scatters (sequence parallel). Every schedule equals the program for
// P in {1, 2, 4}, at sizes the ranks do not divide (3 heads, hidden 6, 3
// tokens) and at sizes they do.
class EquivalenceLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(EquivalenceLayer, EveryScheduleOfTheLayerProgram) {
  expect_every_tuned_schedule_equal(GetParam(),
                                    {Bindings{{"B", 1}, {"S", 3}, {"NH", 3}, {"D", 2}, {"F", 9}},
                                     Bindings{{"B", 2}, {"S", 4}, {"NH", 4}, {"D", 2}, {"F", 16}}});
}

INSTANTIATE_TEST_SUITE_P(Workloads, EquivalenceLayer,
                         ::testing::Values("megatron_layer_fwd", "megatron_layer_bwd", "megatron_layer_sp_fwd",
                                           "megatron_layer_sp_bwd"),
                         [](const auto& info) { return info.param; });

// A family's sequence-parallel layer programs (<family>_layer_sp_{fwd,bwd})
// compute its tensor-parallel ones' outputs at `sizes` for P in {1, 2, 4}.
void expect_sequence_parallel_equals_tensor_parallel(const std::string& family, const Bindings& sizes) {
  for (const char* pass : {"fwd", "bwd"}) {
    const Program tp = workload(family + "_layer_" + pass);
    const Program sp = workload(family + "_layer_sp_" + pass);
    const Bindings b = tp.bind(sizes);
    for (int ranks : {1, 2, 4}) {
      SCOPED_TRACE(fmt::format("{} P={}", sp.name, ranks));
      const State expected = interpret(tp, ranks, b, make_inputs(tp, ranks, b));
      const State actual = interpret(sp, ranks, b, make_inputs(sp, ranks, b));
      const auto mismatches = compare_outputs(tp, expected, actual, ranks);
      EXPECT_TRUE(mismatches.empty()) << describe(mismatches);
    }
  }
}

// The Llama layer programs (workloads/llama_layer_*.yaml; issue 29): RMSNorm,
// the QKV GEMM of (NH + 2 KV) D columns, the attention core per K/V group
// (a group's G query heads stacked along the rows), SwiGLU, and their
// backward, tensor and sequence parallel; and the Nemotron-4 ones
// (workloads/nemotron_layer_*.yaml), the same grouped-query layer with
// LayerNorm and a squared-ReLU MLP (max(u, 0) squared; its backward 2 r dg).
// Every schedule, with the kernel choices, equals the program for P in
// {1, 2, 4}, with K/V groups the ranks do not divide (3 over 2 and 4) and
// groups of 1 (multi-head), 2 and 3 query heads.
class EquivalenceLlamaLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(EquivalenceLlamaLayer, EveryScheduleOfTheLayerProgram) {
  expect_every_tuned_schedule_equal(
      GetParam(),
      {Bindings{{"B", 1}, {"S", 3}, {"H", 6}, {"KV", 3}, {"G", 1}, {"GQ", 3}, {"D", 2}, {"F", 9}},
       Bindings{{"B", 1}, {"S", 3}, {"H", 6}, {"KV", 3}, {"G", 2}, {"GQ", 4}, {"D", 2}, {"F", 9}},
       Bindings{{"B", 2}, {"S", 4}, {"H", 8}, {"KV", 2}, {"G", 3}, {"GQ", 5}, {"D", 2}, {"F", 16}}});
}

INSTANTIATE_TEST_SUITE_P(Workloads, EquivalenceLlamaLayer,
                         ::testing::Values("llama_layer_fwd", "llama_layer_bwd", "llama_layer_sp_fwd",
                                           "llama_layer_sp_bwd", "nemotron_layer_fwd", "nemotron_layer_bwd",
                                           "nemotron_layer_sp_fwd", "nemotron_layer_sp_bwd"),
                         [](const auto& info) { return info.param; });

// The multi-head latent attention programs (workloads/mla_layer_*.yaml;
// DeepSeek-V3): duplicated down-projections, the latents' RMSNorms,
// column-parallel up-projections, the attention core with a query/key head
// dimension DQ other than the value's DV, SwiGLU, and their backward, tensor
// and sequence parallel. Every schedule, with the kernel choices, equals the
// program for P in {1, 2, 4}, with heads the ranks do not divide (3 over 2
// and 4) and DQ above, equal to and below DV.
class EquivalenceMlaLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(EquivalenceMlaLayer, EveryScheduleOfTheLayerProgram) {
  expect_every_tuned_schedule_equal(
      GetParam(),
      {Bindings{{"B", 1}, {"S", 3}, {"H", 5}, {"NH", 3}, {"QR", 4}, {"KR", 3}, {"KE", 4}, {"DQ", 3}, {"DV", 2},
                {"DKV", 4}, {"F", 8}},
       Bindings{{"B", 1}, {"S", 3}, {"H", 6}, {"NH", 3}, {"QR", 3}, {"KR", 2}, {"KE", 3}, {"DQ", 2}, {"DV", 2},
                {"DKV", 3}, {"F", 9}},
       Bindings{{"B", 2}, {"S", 4}, {"H", 4}, {"NH", 4}, {"QR", 5}, {"KR", 3}, {"KE", 4}, {"DQ", 2}, {"DV", 3},
                {"DKV", 4}, {"F", 8}}});
}

INSTANTIATE_TEST_SUITE_P(Workloads, EquivalenceMlaLayer,
                         ::testing::Values("mla_layer_fwd", "mla_layer_bwd", "mla_layer_sp_fwd", "mla_layer_sp_bwd"),
                         [](const auto& info) { return info.param; });

// The sequence-parallel MLA programs compute the tensor-parallel ones'
// outputs, but for the down-projections' weight gradients: over each rank's
// tokens, partial sums whose sum over the ranks is the tensor-parallel
// program's (Megatron-LM reduces them once per step).
TEST(EquivalenceMlaLayer, SequenceParallelEqualsTensorParallel) {
  const Bindings sizes{{"B", 1}, {"S", 4}, {"H", 4}, {"NH", 2}, {"QR", 3}, {"KR", 2}, {"KE", 3},
                       {"DQ", 3}, {"DV", 2}, {"DKV", 3}, {"F", 8}};
  const std::vector<std::string> partial{"dwdq", "dwdkv"};
  for (const char* pass : {"fwd", "bwd"}) {
    Program tp = workload(std::string("mla_layer_") + pass);
    const Program sp = workload(std::string("mla_layer_sp_") + pass);
    const Bindings b = tp.bind(sizes);
    for (int ranks : {1, 2, 4}) {
      SCOPED_TRACE(fmt::format("{} P={}", sp.name, ranks));
      const State expected = interpret(tp, ranks, b, make_inputs(tp, ranks, b));
      const State actual = interpret(sp, ranks, b, make_inputs(sp, ranks, b));
      Program whole = tp;
      std::erase_if(whole.outputs, [&](const std::string& o) {
        return std::find(partial.begin(), partial.end(), o) != partial.end();
      });
      const auto mismatches = compare_outputs(whole, expected, actual, ranks);
      EXPECT_TRUE(mismatches.empty()) << describe(mismatches);
      for (const std::string& w : partial) {
        if (!expected.contains(w)) continue;
        const std::vector<double> e = global_value(expected.at(w), ranks);
        const std::vector<double> parts = global_value(actual.at(w), ranks);
        ASSERT_EQ(parts.size(), e.size() * std::size_t(ranks)) << w;
        for (std::size_t i = 0; i < e.size(); ++i) {
          double sum = 0;
          for (int r = 0; r < ranks; ++r) sum += parts[std::size_t(r) * e.size() + i];
          EXPECT_NEAR(sum, e[i], 1e-9 * std::max(1.0, std::fabs(e[i]))) << w << "[" << i << "]";
        }
      }
    }
  }
}

// The MoE programs (workloads/moe_layer_*.yaml; issue 32): router, dispatch
// and combine all-to-alls, grouped SwiGLU GEMMs over each rank's experts, the
// weighted sum, forward and backward. Every schedule equals the program for P
// in {1, 2, 4}: experts the ranks divide and do not (3 over 2 and 4), slots
// per expert ragged over the ranks (5, 7) and a skewed distribution (every
// expert padded to the hottest one's slots, S above T K / E).
class EquivalenceMoeLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(EquivalenceMoeLayer, EveryScheduleOfTheMoeProgram) {
  expect_every_tuned_schedule_equal(
      GetParam(),
      {Bindings{{"T", 8}, {"H", 6}, {"E", 4}, {"K", 2}, {"S", 4}, {"F", 5}},
       Bindings{{"T", 6}, {"H", 4}, {"E", 3}, {"K", 2}, {"S", 5}, {"F", 3}},
       Bindings{{"T", 8}, {"H", 4}, {"E", 8}, {"K", 2}, {"S", 7}, {"F", 2}}},
      1);
}

INSTANTIATE_TEST_SUITE_P(Workloads, EquivalenceMoeLayer, ::testing::Values("moe_layer_fwd", "moe_layer_bwd"),
                         [](const auto& info) { return info.param; });

// The sequence-parallel Llama and Nemotron programs compute the tensor-parallel ones' outputs.
TEST(EquivalenceLlamaLayer, SequenceParallelEqualsTensorParallel) {
  const Bindings sizes{{"B", 1}, {"S", 4}, {"H", 4}, {"KV", 2}, {"G", 2}, {"GQ", 4}, {"D", 2}, {"F", 8}};
  for (const char* family : {"llama", "nemotron"})
    expect_sequence_parallel_equals_tensor_parallel(family, sizes);
}

// Sequence parallelism changes where values live, not what they are: the
// sequence-parallel layer programs compute the tensor-parallel ones' outputs
// (the same inputs by position, the same dropout masks by site) for P in
// {1, 2, 4}; and a program with one collective taken out does not.
TEST(EquivalenceLayer, SequenceParallelEqualsTensorParallel) {
  const Bindings sizes{{"B", 1}, {"S", 4}, {"NH", 2}, {"D", 2}, {"F", 8}};
  expect_sequence_parallel_equals_tensor_parallel("megatron", sizes);
  // The forward without its second allreduce (y2's partial sums used as they
  // are) differs from the program from 2 ranks on: the comparison can fail.
  Program partial = workload("megatron_layer_fwd");
  for (auto& st : partial.stmts)
    if (st.name == "z2") {
      st.op = OpKind::compute;
      st.expr = make_tensor("y2");
      st.operands.clear();
    }
  check(partial);
  const Program tp = workload("megatron_layer_fwd");
  const Bindings b = tp.bind(sizes);
  const State in = make_inputs(tp, 2, b);
  EXPECT_FALSE(compare_outputs(tp, interpret(tp, 2, b, in), interpret(partial, 2, b, in), 2).empty());
}

// allreduce(mean) (NCCL's ncclAvg): the program's mean is its sum divided by
// the ranks, and every schedule (the mean split into a reduce-scatter of
// means and an allgather, fused, sliced) equals the program, ragged sizes and
// rank counts that do not divide them included.
TEST(EquivalenceMean, EverySchedulesMeanEqualsTheSumOverTheRanks) {
  const Program p = load_program(coconet::test::source_root() + "/tests/workloads/adam_mean.yaml");
  Program summed = p;
  for (auto& st : summed.stmts)
    if (st.op == OpKind::allreduce) st.reduce = ReduceOp::sum;
  const auto schedules = enumerate_schedules(p);
  ASSERT_GE(schedules.size(), 4u);
  std::set<std::string> split;  // schedules whose mean is a reduce-scatter of means
  for (const auto& s : schedules)
    for (const auto& st : s.program.stmts)
      if (st.op == OpKind::reducescatter && st.reduce == ReduceOp::mean) split.insert(s.name());
  EXPECT_FALSE(split.empty()) << "split keeps the mean";
  for (const std::int64_t n : {1, 7, 37, 64}) {
    const Bindings b = p.bind({{"N", n}});
    for (int ranks : {1, 2, 3, 4, 8}) {
      const State in = make_inputs(p, ranks, b);
      const State expected = interpret(p, ranks, b, in);
      const auto mean = global_value(expected.at("g1"), ranks);
      const auto sum = global_value(interpret(summed, ranks, b, in).at("g1"), ranks);
      ASSERT_EQ(mean.size(), sum.size());
      for (std::size_t i = 0; i < mean.size(); ++i)
        EXPECT_EQ(mean[i], sum[i] / ranks) << "element " << i << " P=" << ranks << " N=" << n;
      for (const auto& s : schedules) {
        SCOPED_TRACE(fmt::format("{} P={} N={}", s.name(), ranks, n));
        EXPECT_TRUE(compare_outputs(p, expected, interpret(s, ranks, b, in), ranks).empty());
      }
      // And the check can fail: the summed program differs wherever P > 1.
      if (ranks > 1) {
        EXPECT_FALSE(compare_outputs(p, expected, interpret(summed, ranks, b, in), ranks).empty());
      }
    }
  }
}

// The alltoall workload: its one schedule (an alltoall is neither fused nor
// overlapped) equals the program, and the program equals the same
// computation written without alltoall (whole tensors on every rank).
TEST(EquivalenceAlltoall, UlyssesReSlicingEqualsTheWholeComputation) {
  const Program p = load_program(coconet::test::source_root() + "/tests/workloads/alltoall_ulysses.yaml");
  Program whole = p;
  whole.inputs[0].type.layout = Layout::replicated();
  for (auto& st : whole.stmts)
    if (st.op == OpKind::alltoall) {  // y = alltoall(x, d) becomes y = x
      st.op = OpKind::compute;
      st.expr = make_tensor(st.operands.front());
      st.operands.clear();
    }
  check(whole);
  const auto schedules = enumerate_schedules(p);
  for (const Bindings& sizes : {Bindings{{"B", 1}, {"S", 7}, {"H", 5}}, Bindings{{"B", 2}, {"S", 4}, {"H", 8}}}) {
    const Bindings b = p.bind(sizes);
    for (int ranks : {1, 2, 3, 4, 8}) {
      const State in = make_inputs(p, ranks, b);
      const State expected = interpret(p, ranks, b, in);
      const State reference = interpret(whole, ranks, b, in);
      for (const std::string out : {"out", "xh"})
        EXPECT_EQ(global_value(expected.at(out), ranks), global_value(reference.at(out), ranks))
            << out << " P=" << ranks << " " << sizes_text(b);
      for (const auto& s : schedules) {
        SCOPED_TRACE(fmt::format("{} P={} sizes {}", s.name(), ranks, sizes_text(b)));
        EXPECT_TRUE(compare_outputs(p, expected, interpret(s, ranks, b, in), ranks).empty());
      }
    }
  }
}

// Sizes smaller than the number of ranks leave some ranks with empty slices.
TEST(EquivalenceTiny, SizesBelowTheRankCount) {
  for (const std::string w : {"adam", "lamb", "megatron_mlp", "gpt3_pipeline"}) {
    const Program p = workload(w);
    const auto schedules = enumerate_schedules(p);
    for (std::int64_t n = 1; n <= 9; ++n) {
      const Bindings b =
          p.params.contains("N") ? p.bind({{"N", n}}) : p.bind({{"B", 1}, {"S", n}, {"H", 2}});
      for (int ranks : {3, 8}) {
        const State in = make_inputs(p, ranks, b);
        const State expected = interpret(p, ranks, b, in);
        for (const auto& s : schedules) {
          SCOPED_TRACE(fmt::format("{} {} P={} n={}", w, s.name(), ranks, n));
          const auto mismatches = compare_outputs(p, expected, interpret(s, ranks, b, in), ranks);
          EXPECT_TRUE(mismatches.empty()) << describe(mismatches);
        }
      }
    }
  }
}

// The property test must be able to fail: a schedule whose program is wrong
// (one operator changed) is caught.
TEST(EquivalenceNegative, AWrongScheduleIsCaught) {
  const Program p = workload("adam");
  const auto schedules = enumerate_schedules(p);
  Schedule broken = schedules.back();
  for (auto& st : broken.program.stmts)
    if (st.op == OpKind::reducescatter) st.reduce = ReduceOp::max;
  const Bindings b = p.bind({{"N", 37}});
  const State in = make_inputs(p, 3, b);
  const auto mismatches =
      compare_outputs(p, interpret(p, 3, b, in), interpret(broken, 3, b, in), 3);
  EXPECT_FALSE(mismatches.empty());
}

// The dropout mask of the Megatron epilogue is keyed by global index, so the
// schedule that computes it on slices drops exactly the same elements.
TEST(EquivalenceDropout, SlicedEpilogueDropsTheSameElements) {
  const Program p = workload("megatron_attention");
  const auto schedules = enumerate_schedules(p);
  const auto it = std::find_if(schedules.begin(), schedules.end(),
                               [](const Schedule& s) { return s.name() == "MM-RS-C-AG"; });
  ASSERT_NE(it, schedules.end());
  const Bindings b = p.bind({{"B", 1}, {"S", 7}, {"H", 6}});
  const State in = make_inputs(p, 3, b);
  const auto whole = global_value(interpret(p, 3, b, in).at("out"), 3);
  const auto sliced = global_value(interpret(*it, 3, b, in).at("out.s"), 3);
  EXPECT_EQ(whole, sliced);
}

}  // namespace
}  // namespace coconet::model
