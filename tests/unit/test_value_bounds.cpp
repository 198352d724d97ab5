// The bound analysis of value magnitudes (model/value_bounds.h) and the
// choice of input ranges it drives (model/input_ranges.h): every shipped
// workload at its published sizes stays finite with headroom on 1 to 16
// ranks in f16, bf16 and f32; the bounds hold the interpreter's values; the
// classic inputs are shown to overflow where they did.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "model/error.h"
#include "model/input_ranges.h"
#include "model/interpreter.h"
#include "model/parse.h"
#include "model/value_bounds.h"
#include "tests/paths.h"

namespace coconet::model {
namespace {

Program workload(const std::string& name) {
  return load_program(coconet::test::source_root() + "/workloads/" + name + ".yaml");
}

// Every tensor of `p` (inputs and values) in dtype `t`, but the statistics
// (norms and row sums and maxima): mixed-precision implementations keep them
// in f32 (Apex's FusedLAMB returns its L2 norms in f32, its fused LayerNorm
// and Megatron-LM's fused softmax accumulate row statistics in f32), and a
// norm over 3.9e9 elements of magnitude ~1, or a row's sum of 3072 squares,
// does not fit f16 for any inputs that leave the values meaningful.
Program retyped(Program p, DType t) {
  for (auto& in : p.inputs) in.type.dtype = t;
  for (auto& s : p.stmts)
    if (s.op != OpKind::norm && s.op != OpKind::rowreduce) s.type.dtype = t;
  return p;
}

// The published sizes of each shipped workload (/work/shared/PAPER.md, the
// CoCoNet paper's section 6, and each workload file's comments): the
// optimizers at 2^10 and 2^30 elements and BERT's 334M (the default), 1.2B,
// 3.9B parameters; the Megatron-LM blocks at GPT-2 8.3B's B in {8, 16},
// S = 1024, H = 3072; the GPT-3 pipeline at H = 12288, S = 2048, B in
// {1, 2, 4, 6}. The layer programs publish no sizes of their own (their
// defaults are test sizes, `coconet step` prices them at a model's shapes
// without running them): their defaults, and the Megatron layers at GPT-2
// 8.3B's shapes (H = 3072 as 32 heads of 96, F = 4H, S = 1024, B = 8); the
// MoE programs (likewise priced, not run, at a model's shapes) their defaults.
struct Published {
  std::string workload;
  std::vector<Bindings> sizes;  // overrides of the defaults; {} is the defaults
};

std::vector<Published> published() {
  const std::vector<Bindings> optimizer{{{"N", 1 << 10}}, {}, {{"N", 1'200'000'000}},
                                        {{"N", 3'900'000'000}}, {{"N", std::int64_t{1} << 30}}};
  const std::vector<Bindings> megatron{{{"B", 8}}, {{"B", 16}}, {{"B", 2}}};
  const std::vector<Bindings> layer_8_3b{{}, {{"B", 8}, {"S", 1024}, {"NH", 32}, {"D", 96}, {"F", 12288}}};
  return {
      {"sgd", optimizer},
      {"adam", optimizer},
      {"lamb", optimizer},
      {"megatron_mlp", megatron},
      {"megatron_attention", megatron},
      {"gpt3_pipeline", {{{"B", 1}}, {{"B", 2}}, {{"B", 4}}, {{"B", 6}}}},
      {"megatron_layer_fwd", layer_8_3b},
      {"megatron_layer_sp_fwd", layer_8_3b},
      {"megatron_layer_bwd", layer_8_3b},
      {"megatron_layer_sp_bwd", layer_8_3b},
      {"llama_layer_fwd", {{}}},
      {"llama_layer_sp_fwd", {{}}},
      {"llama_layer_bwd", {{}}},
      {"llama_layer_sp_bwd", {{}}},
      {"nemotron_layer_fwd", {{}}},
      {"nemotron_layer_sp_fwd", {{}}},
      {"nemotron_layer_bwd", {{}}},
      {"nemotron_layer_sp_bwd", {{}}},
      {"mla_layer_fwd", {{}}},
      {"mla_layer_sp_fwd", {{}}},
      {"mla_layer_bwd", {{}}},
      {"mla_layer_sp_bwd", {{}}},
      {"transformer_layer", {{}}},
      {"moe_layer_fwd", {{}}},
      {"moe_layer_bwd", {{}}},
  };
}

// What the analysis cannot bound: the Megatron layer backwards in f16 at
// GPT-2 8.3B's shapes. A LayerNorm backward multiplies by 1/std of its row,
// which intervals bound only by 1/sqrt(eps) = 316 (a row's variance has no
// lower bound without relating its elements), three times over
// (rs2 * (... d2 * rs2 * rs2 ...)), and the wgrad GEMMs then sum B*S = 8192
// tokens: dwo's bound is about 250 times f16's largest value. These cases
// are asserted to fail, so that the list shrinks when the analysis learns more.
bool beyond_the_analysis(const std::string& workload, std::size_t variant, const Bindings& overrides) {
  const bool backward = workload == "megatron_layer_bwd" || workload == "megatron_layer_sp_bwd";
  return backward && variant == 1 /* f16 */ && !overrides.empty();
}

const int kRankCounts[] = {1, 2, 4, 8, 16};
const DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};

TEST(InputRanges, EveryShippedWorkloadIsListedWithItsPublishedSizes) {
  std::size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(coconet::test::source_root() + "/workloads"))
    files += f.path().extension() == ".yaml";
  EXPECT_EQ(files, published().size()) << "a workload was added: list its published sizes above";
}

// For each workload, size set, rank count and dtype (every tensor retyped,
// and as declared): some rung fits with kInputHeadroom, and its bounds say so.
TEST(InputRanges, EveryWorkloadAtPublishedSizesStaysFiniteWithHeadroom) {
  int cases = 0;
  for (const auto& w : published()) {
    const Program declared = workload(w.workload);
    std::vector<Program> variants{declared};
    for (DType t : kDTypes) variants.push_back(retyped(declared, t));
    for (const auto& overrides : w.sizes) {
      const Bindings sizes = declared.bind(overrides);
      for (int ranks : kRankCounts)
        for (std::size_t v = 0; v < variants.size(); ++v) {
          const std::string what = w.workload + " variant " + std::to_string(v) + " on " + std::to_string(ranks);
          InputChoice c;
          if (beyond_the_analysis(w.workload, v, overrides)) {
            EXPECT_THROW((void)choose_inputs(variants[v], sizes, ranks), UserError) << what;
            continue;
          }
          try {
            c = choose_inputs(variants[v], sizes, ranks);
          } catch (const UserError& e) {
            ADD_FAILURE() << what << ": " << e.what();
            continue;
          }
          const ValueBounds b = bound_values(variants[v], sizes, ranks, c.ranges);
          EXPECT_TRUE(b.problems.empty()) << what;
          EXPECT_GE(headroom(variants[v], b).ratio, kInputHeadroom) << what;
          ++cases;
        }
    }
  }
  EXPECT_GT(cases, 500);
}

// The failure this fixes: megatron_mlp at the paper's H = 3072, S = 1024
// with the classic inputs in [1, 4]: each output element sums 4H = 12288
// products of up to 4 * 4 over the ranks, 196608, three times f16's 65504.
TEST(InputRanges, ClassicInputsOverflowMegatronMlpAtPaperSize) {
  const Program p = workload("megatron_mlp");
  const Bindings sizes = p.bind({{"B", 2}});
  for (int ranks : kRankCounts) {
    const ValueBounds b = bound_values(p, sizes, ranks, ladder_ranges(p, 0));
    EXPECT_DOUBLE_EQ(b.values.at("z").hi, 4.0 * 3072 * 4 * 4) << ranks;
    EXPECT_LT(headroom(p, b).ratio, 1.0) << ranks;
    const InputChoice c = choose_inputs(p, sizes, ranks);
    EXPECT_GT(c.rung, 0) << ranks;
    EXPECT_GE(c.headroom, kInputHeadroom) << ranks;
  }
}

// A forced bigger problem: no rung keeps a GEMM of 2^28 terms in f16; the
// error names the value and asks for smaller sizes.
TEST(InputRanges, NoRungFitsAnEnormousReductionInF16) {
  const Program p = workload("megatron_mlp");
  try {
    (void)choose_inputs(p, p.bind({{"B", 1}, {"S", 1}, {"H", std::int64_t{1} << 26}}), 2);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("pass smaller sizes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("megatron_mlp"), std::string::npos) << e.what();
  }
}

// The classic inputs stay where they fit, so small runs keep their values.
TEST(InputRanges, SmallProgramsKeepTheClassicInputs) {
  for (const char* name : {"sgd", "adam", "megatron_mlp", "transformer_layer", "megatron_layer_fwd"}) {
    const Program p = workload(name);
    const Bindings small = p.bind(std::string(name).starts_with("megatron_mlp") ? Bindings{{"B", 1}, {"S", 4}, {"H", 8}}
                                  : p.params.contains("N")                     ? Bindings{{"N", 1000}}
                                                                               : Bindings{});
    EXPECT_EQ(choose_inputs(p, small, 2).rung, 0) << name;
  }
}

// Inputs that reach a sqrt or a divisor stay positive on the signed rungs.
TEST(InputRanges, InputsReachingASqrtStayPositive) {
  const Program p = workload("adam");  // g, w, m, v
  const std::vector<bool> positive = inputs_needing_positive(p);
  EXPECT_EQ(positive, (std::vector<bool>{true, false, false, true}));
  const auto r = ladder_ranges(p, 1);
  EXPECT_EQ(r[0], (InputRange{1, 4, 0}));
  EXPECT_EQ(r[1], (InputRange{-3, 3, 0}));
  EXPECT_EQ(ladder_ranges(p, ladder_rungs() - 1)[1], (InputRange{-1, 1, kMaxInputShift}));
}

// Soundness: every element the interpreter computes lies in its value's
// interval, for every shipped workload at its default sizes on 2 and 3
// ranks (the optimizers at 1000 elements), with the chosen inputs and with
// the last rung's.
TEST(ValueBounds, HoldTheInterpretersValues) {
  for (const auto& w : published()) {
    const Program p = workload(w.workload);
    const Bindings sizes = p.bind(p.params.contains("N")  ? Bindings{{"N", 1000}}
                                  : p.params.contains("H") && w.workload.starts_with("megatron_")
                                      ? Bindings{{"B", 1}, {"S", 8}, {"H", 16}}
                                  : p.params.contains("H") && w.workload == "gpt3_pipeline"
                                      ? Bindings{{"S", 4}, {"H", 24}}
                                      : Bindings{});
    for (int ranks : {2, 3}) {
      for (int rung : {choose_inputs(p, sizes, ranks).rung, ladder_rungs() - 1}) {
        const auto ranges = ladder_ranges(p, rung);
        const ValueBounds b = bound_values(p, sizes, ranks, ranges);
        const State s = interpret(p, ranks, sizes, make_inputs(p, ranks, sizes, 1, ranges));
        for (const auto& [name, value] : s) {
          const Interval in = b.values.at(name);
          const double slack = 1e-9 * std::max(1.0, in.magnitude());
          for (const auto& part : value.ranks)
            for (double x : part) {
              ASSERT_GE(x, in.lo - slack) << w.workload << " " << name << " rung " << rung << " P " << ranks;
              ASSERT_LE(x, in.hi + slack) << w.workload << " " << name << " rung " << rung << " P " << ranks;
            }
        }
      }
    }
  }
}

Program parsed(const std::string& text) { return parse_program(text, "test.yaml"); }

TEST(ValueBounds, SoftmaxShiftAndRatioAreBoundedByTheirRows) {
  const Program p = parsed(R"(name: softmax
params: {N: 4, H: 1000}
tensors:
  x: {dtype: f16, shape: [N, H], layout: replicated}
program:
  - m = rowmax(x)
  - e = exp(x - m)
  - s = rowsum(e)
  - y = e / s
outputs: [y]
)");
  const ValueBounds b = bound_values(p, p.bind(), 2, {InputRange{-3, 3, 0}});
  EXPECT_DOUBLE_EQ(b.values.at("e").hi, 1.0);
  EXPECT_DOUBLE_EQ(b.values.at("e").lo, std::exp(-6.0));
  EXPECT_DOUBLE_EQ(b.values.at("s").hi, 1000.0);
  EXPECT_DOUBLE_EQ(b.values.at("y").lo, 0.0);
  EXPECT_DOUBLE_EQ(b.values.at("y").hi, 1.0);
}

// Squared ReLU (workloads/nemotron_layer_*): max(u, 0) clips the interval at
// 0, its square stays non-negative, and the backward's 2 r dg is bounded by
// both.
TEST(ValueBounds, SquaredReluIsClippedAtZero) {
  const Program p = parsed(R"(name: relu2
params: {N: 4}
tensors:
  u: {dtype: bf16, shape: [N], layout: replicated}
  dg: {dtype: bf16, shape: [N], layout: replicated}
program:
  - r = max(u, 0)
  - g = r * r
  - du = dg * 2 * r
outputs: [g, du]
)");
  const ValueBounds b = bound_values(p, p.bind(), 2, {InputRange{-3, 5, 0}, InputRange{-2, 1, 0}});
  EXPECT_TRUE(b.problems.empty());
  EXPECT_DOUBLE_EQ(b.values.at("r").lo, 0.0);
  EXPECT_DOUBLE_EQ(b.values.at("r").hi, 5.0);
  EXPECT_DOUBLE_EQ(b.values.at("g").lo, 0.0);
  EXPECT_DOUBLE_EQ(b.values.at("g").hi, 25.0);
  EXPECT_DOUBLE_EQ(b.values.at("du").lo, -20.0);
  EXPECT_DOUBLE_EQ(b.values.at("du").hi, 10.0);
}

TEST(ValueBounds, DomainProblemsNameTheStatement) {
  const Program p = parsed(R"(name: domain
params: {N: 4}
tensors:
  x: {dtype: f32, shape: [N], layout: local}
  w: {dtype: f32, shape: [N], layout: replicated}
program:
  - y = w / x
  - z = sqrt(w - 2)
outputs: [y, z]
)");
  const ValueBounds b = bound_values(p, p.bind(), 2, {InputRange{-3, 3, 0}, InputRange{1, 4, 0}});
  ASSERT_EQ(b.problems.size(), 2u);
  EXPECT_NE(b.problems[0].find("statement 'y' (test.yaml:"), std::string::npos) << b.problems[0];
  EXPECT_NE(b.problems[0].find("division by"), std::string::npos) << b.problems[0];
  EXPECT_NE(b.problems[1].find("sqrt"), std::string::npos) << b.problems[1];
  EXPECT_FALSE(b.values.at("y").bounded());
  EXPECT_EQ(headroom(p, b).ratio, 0.0);
  // Positive inputs remove both problems: the ladder's signed rungs make them so.
  EXPECT_EQ(inputs_needing_positive(p), (std::vector<bool>{true, true}));
  EXPECT_TRUE(bound_values(p, p.bind(), 2, ladder_ranges(p, 3)).problems.size() == 1u);  // w - 2 may still be < 0
}

TEST(ValueBounds, CollectivesAndGemmsCountTheirTerms) {
  const Program p = workload("megatron_mlp");
  const Bindings sizes = p.bind({{"B", 1}, {"S", 2}, {"H", 10}});  // K = 40: 14 + 13 + 13 on 3 ranks
  const ValueBounds b = bound_values(p, sizes, 3, {InputRange{-2, 2, 0}, InputRange{-1, 1, 1}, InputRange{0, 0, 0},
                                                   InputRange{0, 0, 0}});
  EXPECT_DOUBLE_EQ(b.values.at("y").hi, 14 * 2 * 0.5);  // the first rank's 14 terms of |2 * 1/2|
  EXPECT_DOUBLE_EQ(b.values.at("z").hi, 3 * 14.0);
  EXPECT_DOUBLE_EQ(b.values.at("out").hi, 3 * 14.0 / static_cast<double>(0.9f));  // dropout's 1/(1-p), in f32
}

}  // namespace
}  // namespace coconet::model
