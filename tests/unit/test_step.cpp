// Whole training steps (step/): the model descriptions parse and their
// impossible layouts are rejected with file:line; the composition keeps its
// defining properties (the step is its laid-out pipeline and the data-parallel
// time, each line of the breakdown the slowest stage's own; recomputation and a
// bubble cost time, interleaving and ZeRO shrink what they should); the
// Megatron-LM eq. 3 FLOP count beside the model's; the layout search; and Megatron-LM's Table 1
// (validation/reference/megatron.yaml) within 15%.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include <tuple>
#include <utility>
#include <vector>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"
#include "sim/tuner.h"
#include "model/error.h"
#include "sim/topology.h"
#include "step/collective_times.h"
#include "step/compose.h"
#include "validation/step_reference.h"
#include "step/search.h"
#include "step/spec.h"
#include "step_independent.h"
#include "step_test_model.h"

namespace coconet::step {
namespace {

using testing::a100;
using testing::kSmall;

std::string error_of(const std::string& yaml, const Overrides& o = {}, int nodes = 1) {
  try {
    const ModelSpec s = parse_model(yaml, "small.yaml", o);
    (void)predict_step(s, a100(nodes));
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- the description ------------------------------------------------------------

TEST(StepSpec, EveryShippedModelParsesAndPrices) {
  for (const char* name : {"gpt3-175b", "megatron-1.7b", "megatron-7.5b", "megatron-1008b"}) {
    const ModelSpec s = load_model(name);
    EXPECT_EQ(s.name, name);
    EXPECT_EQ(s.model.ffn, 4 * s.model.hidden) << name;
  }
  const ModelSpec g = load_model("gpt3-175b");
  EXPECT_NEAR(parameters(g.model) / 1e9, 175, 1.5);
  const StepReport r = predict_step(g, sim::load_topology("dgx-h100", {{"nodes", "128"}}));
  EXPECT_GT(r.step_us, 0);
  EXPECT_TRUE(r.memory.fits()) << r.memory.total_GB();
}

TEST(StepSpec, DefaultsAndOverrides) {
  const ModelSpec s = parse_model(kSmall, "small.yaml", {{"parallel.zero", "2"}, {"training.micro_batch", "4"}});
  EXPECT_EQ(s.model.ffn, 4096);
  EXPECT_EQ(s.parallel.zero, 2);
  EXPECT_EQ(s.training.micro_batch, 4);
  EXPECT_EQ(s.parallel.schedule, PipeSchedule::one_f_one_b);
  const Layout l = resolve_layout(s, a100(1));
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.micro_batches, 8);
}

TEST(StepErrors, UnknownKeysAndBadValuesNameTheLine) {
  EXPECT_TRUE(has(error_of(std::string(kSmall) + "  pipeline: 3\n"), "small.yaml:14:")) << error_of(std::string(kSmall) + "  pipeline: 3\n");
  EXPECT_TRUE(has(error_of(std::string(kSmall) + "  pipeline: 3\n"), "unknown key 'pipeline'"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.zero", "4"}}), "zero must be 0 to 3"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.recompute", "half"}}), "not one of none, selective, full"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.schedule", "zb"}}), "not one of gpipe"));
  EXPECT_TRUE(has(error_of(kSmall, {{"model.depth", "3"}}), "unknown key 'depth'"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.virtual_stages", "2"}}), "needs schedule: interleaved"));
  EXPECT_TRUE(has(error_of(kSmall, {{"training.attention", "paged"}}), "must be flash or materialised"));
  EXPECT_TRUE(has(error_of(kSmall, {{"training.fused_kernels", "maybe"}}), "fused_kernels"));
}

// The kernels a model allows: the SC'21 models run without flash attention
// and fused kernels, and a model that forbids them gets neither.
TEST(StepSpec, TheKernelsAModelAllows) {
  EXPECT_TRUE(parse_model(kSmall, "s").training.flash_attention);
  EXPECT_TRUE(parse_model(kSmall, "s").training.fused_kernels);
  for (const char* m : {"megatron-1.7b", "megatron-7.5b", "megatron-1008b"}) {
    const ModelSpec s = load_model(m);
    EXPECT_FALSE(s.training.flash_attention) << m;
    EXPECT_FALSE(s.training.fused_kernels) << m;
  }
  const sim::Topology t = a100(2);
  const StepReport off = predict_step(
      parse_model(kSmall, "s", {{"training.attention", "materialised"}, {"training.fused_kernels", "false"}}), t);
  EXPECT_EQ(off.layer_fwd_schedule.find("FA"), std::string::npos) << off.layer_fwd_schedule;
  EXPECT_EQ(off.layer_fwd_schedule.find('K'), std::string::npos) << off.layer_fwd_schedule;
  EXPECT_GE(off.step_us, predict_step(parse_model(kSmall, "s"), t).step_us);
}

TEST(StepErrors, ImpossibleLayoutsNameTheParallelSection) {
  const std::string tp3 = error_of(kSmall, {{"parallel.tp", "3"}, {"parallel.dp", "1"}, {"parallel.pp", "1"}}, 1);
  EXPECT_TRUE(has(tp3, "small.yaml:12:")) << tp3;
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.tp", "3"}}, 3), "does not divide model.heads")) << error_of(kSmall, {{"parallel.tp", "3"}}, 3);
  // Layers that pp does not divide are laid out unevenly (step.StepStages); more stages than layers is an error.
  EXPECT_EQ(error_of(kSmall, {{"parallel.pp", "3"}}, 3), "");
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.pp", "3"}, {"model.layers", "2"}}, 3), "more than model.layers"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.tp", "8"}, {"parallel.pp", "4"}}, 1), "more than the cluster's 8"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.dp", "4"}}, 1), "more than the cluster's 8"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.dp", "1"}}, 1), "not the cluster's 8"));
  EXPECT_TRUE(has(error_of(kSmall, {{"training.global_batch", "65"}}), "not a whole number"));
}

// ---- the composition ---------------------------------------------------------------

TEST(StepCompose, BreakdownAddsUpAndFlopsFollowEquation3) {
  const ModelSpec s = parse_model(kSmall, "small.yaml");
  const StepReport r = predict_step(s, a100(1));
  // The step against the pipeline laid out here from the stages' parts (not
  // the breakdown's sum, which is how the step time is set).
  testing::expect_step_is_its_laid_out_pipeline(r, "small, 1f1b");
  const Overrides variants[] = {
      {{"parallel.schedule", "interleaved"}, {"parallel.virtual_stages", "2"}, {"parallel.recompute", "full"},
       {"parallel.zero", "3"}},
      {{"parallel.schedule", "gpipe"}, {"parallel.recompute", "selective"}, {"model.layers", "7"}},
      {{"parallel.cp", "2"}, {"parallel.zero", "1"}}};
  for (const Overrides& o : variants) {
    const StepReport v = predict_step(parse_model(kSmall, "small.yaml", o), a100(2));
    testing::expect_step_is_its_laid_out_pipeline(v, o.front().first + "=" + o.front().second);
  }
  EXPECT_GT(r.breakdown.tp_comm_us, 0);
  EXPECT_GT(r.breakdown.pp_bubble_us, 0);
  EXPECT_GT(r.breakdown.dp_comm_us, 0);
  const double B = 64, sq = 1024, l = 8, h = 1024, V = 32000;
  const double eq3 = 96 * B * sq * l * h * h * (1 + sq / (6 * h) + V / (16 * l * h));
  EXPECT_DOUBLE_EQ(r.eq3_flops, eq3);
  EXPECT_NEAR(r.eq3_tflops_per_gpu, eq3 / (r.step_us * 1e-6) / 8 / 1e12, 1e-9);
  // The model's count and MFU: no recomputation, 72 for 96, V/(12lh) for V/(16lh);
  // MFU against the bf16 peak (the step's dtype; 312 on an A100).
  const double no_recompute = 72 * B * sq * l * h * h * (1 + sq / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(r.model_flops / no_recompute, 1.0, 1e-12);
  EXPECT_NEAR(r.mfu, no_recompute / (r.step_us * 1e-6) / 8 / 1e12 / 312, 1e-12);
}

// Selective recomputation runs the attention core's forward again as the
// layer ran it: with flash attention, its flash kernel (and under context
// parallelism cp times it: the blocks against the other ranks' keys, one
// launch each), not the materialised GEMMs and scores; materialised, those.
TEST(StepCompose, SelectiveRecomputationRunsTheAttentionAsTheLayerRanIt) {
  const sim::Topology t = a100(1);
  for (const int cp : {1, 2}) {
    const ModelSpec s = parse_model(kSmall, "s", {{"parallel.recompute", "selective"}, {"parallel.cp", std::to_string(cp)}});
    const StepReport flash = predict_step(s, t);
    LayerBlockPricer pricer(t);
    const LayerBlock& b = pricer.price(step_layer_shape(s, flash.layout));
    ASSERT_TRUE(b.fwd.flash_attention);
    const double expected = cp * b.fwd.attention_us + (cp - 1) * t.gpu.launch_us;
    EXPECT_NEAR(flash.layer.recompute_us, expected, 1e-9 * expected) << "cp " << cp;
    const StepReport materialised =
        predict_step(parse_model(kSmall, "s",
                                 {{"parallel.recompute", "selective"},
                                  {"parallel.cp", std::to_string(cp)},
                                  {"training.attention", "materialised"}}),
                     t);
    EXPECT_GT(materialised.layer.recompute_us, 1.5 * flash.layer.recompute_us) << "cp " << cp;
  }
}

TEST(StepCompose, EachChoiceMovesTimeAndMemoryTheWayItShould) {
  const sim::Topology t = a100(1);
  const ModelSpec s = parse_model(kSmall, "small.yaml");
  const StepReport base = predict_step(s, t);
  const StepReport full = predict_step(parse_model(kSmall, "s", {{"parallel.recompute", "full"}}), t);
  const StepReport sel = predict_step(parse_model(kSmall, "s", {{"parallel.recompute", "selective"}}), t);
  EXPECT_GT(full.step_us, sel.step_us);
  EXPECT_GT(sel.step_us, base.step_us);
  EXPECT_LT(full.memory.activations_GB, sel.memory.activations_GB);
  EXPECT_LT(sel.memory.activations_GB, base.memory.activations_GB);
  const StepReport inter = predict_step(
      parse_model(kSmall, "s", {{"parallel.schedule", "interleaved"}, {"parallel.virtual_stages", "2"}}), t);
  // About half the bubble (SC'21's (pp - 1) / v): not exactly, the first and last
  // stages carry the embedding and the loss (step.StepStages holds the exact form).
  EXPECT_NEAR(inter.breakdown.pp_bubble_us, base.breakdown.pp_bubble_us / 2, 0.05 * base.breakdown.pp_bubble_us);
  EXPECT_GT(inter.memory.activations_GB, base.memory.activations_GB);
  const StepReport gpipe = predict_step(parse_model(kSmall, "s", {{"parallel.schedule", "gpipe"}}), t);
  EXPECT_GT(gpipe.memory.activations_GB, base.memory.activations_GB);
  const StepReport sp = predict_step(parse_model(kSmall, "s", {{"parallel.sequence_parallel", "true"}}), t);
  EXPECT_LT(sp.memory.activations_GB, base.memory.activations_GB);
  double last = base.memory.total_GB();
  for (const char* z : {"1", "2", "3"}) {
    const StepReport r = predict_step(parse_model(kSmall, "s", {{"parallel.zero", z}}), t);
    EXPECT_LT(r.memory.total_GB(), last) << "zero " << z;
    last = r.memory.total_GB();
  }
}

TEST(StepCompose, ALayoutOverMemoryIsReportedNotRefused) {
  const ModelSpec s = load_model("gpt3-175b", {{"parallel.tp", "1"}, {"parallel.pp", "1"},
                                               {"parallel.schedule", "1f1b"}, {"parallel.virtual_stages", "1"}});
  const StepReport r = predict_step(s, sim::load_topology("dgx-h100", {{"nodes", "1"}}));
  EXPECT_FALSE(r.memory.fits());
  EXPECT_GT(r.memory.total_GB(), 1000);
}

// ---- the search --------------------------------------------------------------------

TEST(StepSearch, Gpt3On128H100NodesFindsLayoutsThatFit) {
  const SearchResult r = search_layouts(load_model("gpt3-175b"), sim::load_topology("dgx-h100", {{"nodes", "128"}}));
  ASSERT_FALSE(r.best.empty());
  EXPECT_GT(r.evaluated, 100);
  EXPECT_GT(r.over_memory, 0);
  for (std::size_t i = 0; i < r.best.size(); ++i) {
    EXPECT_TRUE(r.best[i].memory.fits());
    if (i > 0) {
      EXPECT_LE(r.best[i - 1].step_us, r.best[i].step_us);
    }
  }
  EXPECT_GT(r.best.front().mfu, 0.2);
  EXPECT_LT(r.best.front().mfu, 0.8);
}

TEST(StepSearch, TheBoundedStepIsNeverSlowerAndTheSearchIsExact) {
  // Every layout of a small search, each laid out: the search's best (which
  // lays out only those whose bound can still win) are the same layouts in
  // the same order, and no bound is above its step.
  const ModelSpec base = parse_model(kSmall, "small.yaml");
  const sim::Topology t = a100(1);
  SearchOptions o;
  o.keep = 4;
  o.vary_cp = false;
  o.vary_zero = false;
  const SearchResult r = search_layouts(base, t, o);
  ASSERT_EQ(r.best.size(), 4u);
  EXPECT_LT(r.laid_out, r.priced);  // the bound spared some: the pruning is exercised
  DpBlockPricer dp(t);
  LayerBlockPricer layers(t);
  for (int pp : {1, 2, 4})
    for (int mb : {1, 2, 4})
      for (const char* sch : {"gpipe", "1f1b", "interleaved"})
        for (const char* rc : {"none", "selective", "full"}) {
          const Overrides set{{"parallel.tp", "1"}, {"parallel.pp", std::to_string(pp)},
                              {"training.micro_batch", std::to_string(mb)}, {"parallel.schedule", sch},
                              {"parallel.virtual_stages", std::string(sch) == std::string("interleaved") ? "2" : "1"},
                              {"parallel.recompute", rc}};
          ModelSpec s;
          try {
            s = parse_model(kSmall, "small.yaml", set);
            (void)resolve_layout(s, t);
          } catch (const UserError&) {
            continue;
          }
          const StepReport bound = predict_step_bound(s, t, &dp, &layers), exact = predict_step(s, t, &dp, &layers);
          EXPECT_LE(bound.step_us, exact.step_us * (1 + 1e-12)) << pp << " " << mb << " " << sch << " " << rc;
          if (pp == 1) {
            EXPECT_DOUBLE_EQ(bound.step_us, exact.step_us);
          }
        }
  // The search's best against laying out every layout it priced.
  SearchOptions every = o;
  every.keep = 1 << 20;  // keep all: nothing can be pruned
  const SearchResult full = search_layouts(base, t, every);
  EXPECT_EQ(full.laid_out, full.priced);
  for (std::size_t k = 0; k < r.best.size(); ++k) EXPECT_DOUBLE_EQ(r.best[k].step_us, full.best[k].step_us) << k;
}

// A layout the search resolved and sized before pricing (SizedLayout) bounds
// as predict_step_bound does from the spec alone, rates and memory included,
// with either attention the model allows; only the spec is left out.
TEST(StepSearch, ASizedLayoutBoundsAsTheSpecAlone) {
  const sim::Topology t = a100(1);
  DpBlockPricer dp(t);
  LayerBlockPricer layers(t);
  int priced = 0;
  for (const char* attention : {"flash", "materialised"})
    for (int pp : {1, 2})
      for (const char* rc : {"none", "full"}) {
        const ModelSpec s = parse_model(kSmall, "small.yaml",
                                        {{"training.attention", attention}, {"parallel.tp", "2"},
                                         {"parallel.pp", std::to_string(pp)}, {"parallel.recompute", rc}});
        const Layout l = resolve_layout(s, t);
        const StepReport plain = predict_step_bound(s, t, &dp, &layers);
        const StepReport sized = predict_step_bound(s, SizedLayout{l, memory_per_gpu(s, l, t)}, t, &dp, &layers);
        const std::string where = std::string(attention) + " pp " + std::to_string(pp) + " " + rc;
        EXPECT_EQ(sized.step_us, plain.step_us) << where;
        EXPECT_EQ(sized.tokens_per_s, plain.tokens_per_s) << where;
        EXPECT_EQ(sized.mfu, plain.mfu) << where;
        // The rates and memory against what they are made of, not against the
        // plain bound alone (which prices through the sized one).
        EXPECT_DOUBLE_EQ(sized.tokens_per_s,
                         double(s.training.global_batch) * double(s.model.sequence) / (sized.step_us * 1e-6))
            << where;
        const bool flash = layers.price(step_layer_shape(s, l)).fwd.flash_attention;
        const Memory want = memory_per_gpu(s, l, t, flash ? AttentionMemory::flash : AttentionMemory::scores);
        EXPECT_EQ(sized.memory.total_GB(), want.total_GB()) << where;
        EXPECT_EQ(plain.memory.total_GB(), want.total_GB()) << where;
        EXPECT_EQ(sized.memory.fits(), want.fits()) << where;
        EXPECT_EQ(plain.spec.name, s.name) << where;
        EXPECT_TRUE(sized.spec.name.empty()) << where;
        ++priced;
      }
  EXPECT_EQ(priced, 8);
}

TEST(StepSearch, PrecisionIsSearchedWhereTheGpuHasAnFp8Rate) {
  const ModelSpec base = parse_model(kSmall, "small.yaml", {{"training.dtype", "bf16"}});
  SearchOptions o;
  o.vary_cp = false;
  o.vary_zero = false;
  o.vary_recompute = false;
  o.vary_micro_batch = false;
  o.vary_schedule = false;
  SearchOptions one = o;
  one.vary_precision = false;
  const sim::Topology h100 = sim::load_topology("dgx-h100", {{"nodes", "1"}});
  const SearchResult both = search_layouts(base, h100, o), bf16 = search_layouts(base, h100, one);
  EXPECT_EQ(both.priced, 2 * bf16.priced);
  EXPECT_TRUE(both.best.front().spec.training.fp8);  // the FP8 GEMMs win here
  for (const StepReport& r : bf16.best) EXPECT_FALSE(r.spec.training.fp8);
  // A100 states no FP8 rate: nothing more to try.
  const SearchResult a = search_layouts(base, a100(1), o);
  EXPECT_EQ(a.priced, search_layouts(base, a100(1), one).priced);
}

TEST(StepSearch, ALayoutThatFitsOnlyWithZeroIsFound) {
  // The least memory any ZeRO 0 layout of the search needs; just under it,
  // the search without ZeRO finds nothing and the search with it does.
  const ModelSpec s = load_model("gpt3-175b");
  const sim::Topology roomy = sim::load_topology("dgx-h100", {{"nodes", "16"}, {"gpu.memory_GB", "1000000"}});
  SearchOptions all;
  all.keep = 1 << 30;
  all.vary_zero = false;
  ModelSpec zero0 = s;
  zero0.parallel.zero = 0;
  const SearchResult everything = search_layouts(zero0, roomy, all);
  ASSERT_FALSE(everything.best.empty());
  double least = everything.best.front().memory.total_GB();
  for (const auto& r : everything.best) least = std::min(least, r.memory.total_GB());
  const std::string cap = std::to_string(least * 0.98 + kDefaultReservedGB);  // what a layout may use: HBM less the reserve
  const sim::Topology tight = sim::load_topology("dgx-h100", {{"nodes", "16"}, {"gpu.memory_GB", cap}});
  SearchOptions no_zero;
  no_zero.vary_zero = false;
  EXPECT_TRUE(search_layouts(zero0, tight, no_zero).best.empty());
  const SearchResult with_zero = search_layouts(zero0, tight);
  ASSERT_FALSE(with_zero.best.empty());
  for (const auto& r : with_zero.best) {
    EXPECT_GE(r.spec.parallel.zero, 1);
    EXPECT_TRUE(r.memory.fits());
  }
}

// The search tells its progress: every (tp, cp) pair as it begins, counted
// from 0 against one total, then once at the total before laying out.
TEST(StepSearch, ProgressCountsEveryPairAndEndsAtTheTotal) {
  const ModelSpec s = load_model("llama3.1-8b");
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "2"}});
  std::vector<std::pair<int, int>> told;
  std::string last;
  SearchOptions o;
  o.vary_precision = false;
  o.progress = [&](int done, int total, const std::string& what) {
    told.emplace_back(done, total);
    last = what;
  };
  const SearchResult r = search_layouts(s, t, o);
  ASSERT_FALSE(r.best.empty());
  ASSERT_GE(told.size(), 3u);  // tp 1, 2, 4, 8 with cp 1 at least, then the laying out
  const int total = told.front().second;
  EXPECT_EQ(int(told.size()), total + 1);
  for (std::size_t i = 0; i < told.size(); ++i) {
    EXPECT_EQ(told[i].first, int(i));
    EXPECT_EQ(told[i].second, total);
  }
  EXPECT_NE(last.find("laying out"), std::string::npos) << last;
}

TEST(StepSearch, GpipeIsNeverFasterThan1F1BAndAppearsWhereAsked) {
  const ModelSpec s = parse_model(kSmall, "small.yaml");
  const sim::Topology t = a100(2);
  SearchOptions all;
  all.keep = 1 << 30;
  const SearchResult r = search_layouts(s, t, all);
  auto key = [](const StepReport& x) {
    return std::make_tuple(x.layout.tp, x.layout.cp, int(x.spec.parallel.cp_comm), x.layout.pp,
                           x.spec.training.micro_batch, int(x.spec.parallel.recompute),
                           x.spec.parallel.zero, x.spec.parallel.sequence_parallel);
  };
  int gpipes = 0;
  for (const auto& g : r.best) {
    if (g.spec.parallel.schedule != PipeSchedule::gpipe) continue;
    ++gpipes;
    bool twin = false;
    for (const auto& o : r.best)
      if (o.spec.parallel.schedule == PipeSchedule::one_f_one_b && key(o) == key(g)) {
        twin = true;
        EXPECT_LE(o.step_us, g.step_us * (1 + 1e-12));  // equal spans, laid out in a different order
        EXPECT_LE(o.memory.total_GB(), g.memory.total_GB());
      }
    EXPECT_TRUE(twin) << "a GPipe layout that fits has a 1F1B one that fits too";
  }
  EXPECT_GT(gpipes, 0);
  // Asked for (the schedule not searched), GPipe is what the search returns.
  SearchOptions fixed;
  fixed.vary_schedule = false;
  fixed.keep = 1 << 30;
  const SearchResult g = search_layouts(parse_model(kSmall, "small.yaml", {{"parallel.schedule", "gpipe"}}), t, fixed);
  ASSERT_FALSE(g.best.empty());
  bool piped = false;
  for (const auto& x : g.best) {
    if (x.layout.pp > 1) {
      piped = true;
      EXPECT_EQ(x.spec.parallel.schedule, PipeSchedule::gpipe);
    }
  }
  EXPECT_TRUE(piped);
}

// ---- the data-parallel blocks through the tuner ----------------------------------------

TEST(StepDpBlock, TheTunersBestAdamScheduleKeepsTheStateAsTheZeroStageDoes) {
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "4"}});
  DpBlockPricer pricer(t);
  const sim::Placement group = sim::place(t, 32);
  const DpBlock replicated = pricer.price(12'500'000, group, false);
  const DpBlock sliced = pricer.price(12'500'000, group, true);
  EXPECT_EQ(replicated.schedule.find("asSlice"), std::string::npos) << replicated.schedule;
  EXPECT_NE(sliced.schedule.find("asSlice"), std::string::npos) << sliced.schedule;
  EXPECT_GT(replicated.time_us, 0);
  EXPECT_EQ(pricer.tuned(), 2);
  (void)pricer.price(12'500'000, group, false);  // cached
  EXPECT_EQ(pricer.tuned(), 2);
  // The same block through the tuner directly (what `coconet predict adam` does).
  const model::Program adam = model::load_program(model::resolve_workload("adam"));
  std::vector<model::Schedule> plain;
  for (auto& x : model::enumerate_schedules(adam))
    if (x.name().find("asSlice") == std::string::npos) plain.push_back(x);
  const sim::TuneResult direct =
      sim::tune(plain, sim::Context{t, 32, {{"N", 12'500'000}}}, sim::predict_space());
  EXPECT_EQ(direct.ranked.front().name, replicated.schedule);
  EXPECT_DOUBLE_EQ(direct.ranked.front().time_us, replicated.time_us);
  // A data-parallel group spread one GPU per node is slower than one packed in a node.
  sim::Placement spread;
  spread.ranks = 8;
  spread.nodes = 4;  // 2 per node
  spread.per_node = 2;
  EXPECT_GT(pricer.price(12'500'000, spread, false).time_us, pricer.price(12'500'000, sim::place(t, 8), false).time_us);
}

// The collectives a step prices by formula, cached (step/collective_times.h):
// each time is sim::predict_collective's, asked once or again, and requests
// that differ in one field (the op, the bytes, the ranks, nodes, GPUs per
// node, pods, a send's crossing) are told apart, so none is served another's
// time; on one rank or for no bytes, 0.
TEST(StepCollectiveTimes, PricesAsPredictCollectiveAndTellsRequestsApart) {
  const sim::Topology t = sim::load_topology("llama3-h100-roce", {{"nodes", "768"}});  // two pods of 3,072 GPUs
  CollectiveTimes times(t);
  const auto direct = [&](model::OpKind op, double bytes, const sim::Placement& where) {
    sim::CollectiveRequest r;
    r.op = op;
    r.bytes = bytes;
    r.where = where;
    return sim::predict_collective(t, r).time_us();
  };
  sim::Placement half_nodes = sim::place(t, 16);  // 2 nodes of 8: the same ranks over 4 nodes of 4
  half_nodes.nodes = 4;
  half_nodes.per_node = 4;
  const std::vector<sim::Placement> groups = {sim::place(t, 8), sim::place(t, 16), half_nodes,
                                              sim::place_strided(t, 64, 8), sim::place_strided(t, 768, 8)};
  ASSERT_NE(groups[3].pods, groups[4].pods);
  using model::OpKind;
  for (int pass = 0; pass < 2; ++pass)  // the second pass reads the cache
    for (OpKind op : {OpKind::allreduce, OpKind::allgather, OpKind::reducescatter, OpKind::alltoall})
      for (const sim::Placement& g : groups)
        for (double bytes : {4e3, 4e6, 4e9}) EXPECT_EQ(times.us(op, bytes, g), direct(op, bytes, g));
  for (int distance : {4, 8, 64}) {
    const sim::Placement peer = sim::place_send(t, distance);
    EXPECT_EQ(times.us(OpKind::send, 1e6, peer), direct(OpKind::send, 1e6, peer)) << distance;
  }
  EXPECT_EQ(times.us(OpKind::allreduce, 1e6, sim::place(t, 1)), 0);
  EXPECT_EQ(times.us(OpKind::allreduce, 0, groups[0]), 0);
}

TEST(StepDpBlock, TheStepSaysWhichScheduleItChoseAndZero2PaysEveryMicroBatch) {
  const sim::Topology t = a100(2);
  const StepReport z0 = predict_step(parse_model(kSmall, "s", {{"parallel.zero", "0"}}), t);
  const StepReport z1 = predict_step(parse_model(kSmall, "s", {{"parallel.zero", "1"}}), t);
  const StepReport z2 = predict_step(parse_model(kSmall, "s", {{"parallel.zero", "2"}}), t);
  const StepReport z3 = predict_step(parse_model(kSmall, "s", {{"parallel.zero", "3"}}), t);
  EXPECT_FALSE(z0.dp_schedule.empty());
  EXPECT_NE(z1.dp_schedule.find("asSlice"), std::string::npos);
  EXPECT_EQ(z1.dp_schedule, z2.dp_schedule);
  EXPECT_NE(z3.dp_schedule.find("asSlice"), std::string::npos);  // ZeRO 3 through the tuner too
  EXPECT_DOUBLE_EQ(z0.breakdown.optimizer_us, 0);  // inside the tuned blocks
  EXPECT_DOUBLE_EQ(z3.breakdown.optimizer_us, 0);
  // ZeRO 2 reduce-scatters each of the m micro-batches' gradients, ZeRO 1 the last's only.
  EXPECT_GT(z2.dp_total_us, z1.dp_total_us);
  EXPECT_GE(z2.breakdown.dp_comm_us, z1.breakdown.dp_comm_us);
  const StepReport z2_twice = predict_step(
      parse_model(kSmall, "s", {{"parallel.zero", "2"}, {"training.global_batch", "128"}}), t);
  const StepReport z1_twice = predict_step(
      parse_model(kSmall, "s", {{"parallel.zero", "1"}, {"training.global_batch", "128"}}), t);
  EXPECT_GT(z2_twice.dp_total_us, z2.dp_total_us * 1.2);
  EXPECT_DOUBLE_EQ(z1_twice.dp_total_us, z1.dp_total_us);
  // ZeRO 3 holds its slice of the weights and one layer gathered whole (over tp).
  const double layer = layer_parameters(z3.spec.model) / z3.layout.tp;
  EXPECT_NEAR(z3.memory.weights_GB, (stage_parameters(z3.spec, z3.layout) / z3.layout.dp + layer) * 2 / 1e9, 1e-12);
  // 32-bit gradients go through the same tuned blocks, the workload's g retyped.
  EXPECT_FALSE(predict_step(parse_model(kSmall, "s", {{"training.grad_dtype", "f32"}}), t).dp_schedule.empty());
}

// ---- a layer's forward and backward through the tuner --------------------------------

LayerShape gpt_layer(int tp, bool sp, bool overlap) {
  // GPT-3 175B's layer (96 heads of 128, ffn 4 x 12288), micro-batch 1, sequence 2048.
  return LayerShape{1, 2048, 96, 128, 49152, tp, model::DType::bf16, sp, overlap};
}

TEST(StepLayerBlock, TheLayerIsTheTunersBestScheduleOfTheLayerPrograms) {
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "1"}});
  LayerBlockPricer pricer(t);
  const LayerBlock plain = pricer.price(gpt_layer(8, false, false));
  const LayerBlock overlapped = pricer.price(gpt_layer(8, false, true));
  const LayerBlock sp = pricer.price(gpt_layer(8, true, false));
  EXPECT_EQ(pricer.tuned(), 3);
  (void)pricer.price(gpt_layer(8, false, false));  // cached
  EXPECT_EQ(pricer.tuned(), 3);
  // Without overlap: no stage beside another and no collective fused; the
  // tensor-parallel programs allreduce, the sequence-parallel ones do not.
  for (const LayerPass* pass : {&plain.fwd, &plain.bwd, &sp.fwd, &sp.bwd}) {
    EXPECT_EQ(pass->schedule.find("ol("), std::string::npos) << pass->schedule;
    EXPECT_EQ(pass->schedule.find("fuse("), std::string::npos) << pass->schedule;
    EXPECT_GT(pass->gemm_us, 0);
    EXPECT_GT(pass->elementwise_us, 0);
    EXPECT_GT(pass->tp_us(), 0);
  }
  EXPECT_NE(plain.fwd.schedule.find("AR"), std::string::npos) << plain.fwd.schedule;
  EXPECT_NE(sp.fwd.schedule.find("AG"), std::string::npos) << sp.fwd.schedule;
  EXPECT_EQ(sp.bwd.schedule.find("AR"), std::string::npos) << sp.bwd.schedule;
  // Overlap widens the tuner's choice (never slower by construction, not
  // checked): here it takes an overlapped schedule, which hides part of the
  // TP collectives behind GEMMs (more than 3% of each pass) and never more
  // than the collectives the plain schedule exposes.
  for (const auto& [ov, pl] : {std::pair{&overlapped.fwd, &plain.fwd}, std::pair{&overlapped.bwd, &plain.bwd}}) {
    EXPECT_NE(ov->schedule.find("ol("), std::string::npos) << ov->schedule;
    EXPECT_LT(ov->time_us, 0.97 * pl->time_us) << ov->schedule;
    EXPECT_LE(pl->time_us - ov->time_us, pl->tp_us() * (1 + 1e-9)) << ov->schedule;
  }
  // The backward has twice the forward's GEMM work (dgrad and wgrad).
  EXPECT_NEAR(plain.bwd.gemm_us / plain.fwd.gemm_us, 2.0, 0.5);
  // Without the kernel choices (training.attention: materialised,
  // fused_kernels: false) the layer is the programs' schedules as written:
  // the same pass through the tuner directly (what `coconet predict` does).
  LayerShape without = gpt_layer(8, false, false);
  without.flash_attention = without.fused_kernels = false;
  const LayerBlock as_written = pricer.price(without);
  // With them the tuner takes flash attention and fused kernels, more than
  // 10% faster each pass (the choice widens the set: never slower by
  // construction, not checked).
  for (const auto& [with, without] : {std::pair{&plain.fwd, &as_written.fwd}, std::pair{&plain.bwd, &as_written.bwd}}) {
    EXPECT_TRUE(with->flash_attention && with->fused_kernels) << with->schedule;
    EXPECT_LT(with->time_us, 0.9 * without->time_us) << with->schedule;
  }
  EXPECT_FALSE(as_written.fwd.flash_attention || as_written.fwd.fused_kernels) << as_written.fwd.schedule;
  model::Program fwd = model::load_program(model::resolve_workload("megatron_layer_fwd"));
  for (auto& in : fwd.inputs) in.type.dtype = model::DType::bf16;
  model::check(fwd);
  std::vector<model::Schedule> unoverlapped;
  for (auto& x : model::enumerate_schedules(fwd))
    if (x.name().find("ol(") == std::string::npos && x.name().find("fuse(") == std::string::npos)
      unoverlapped.push_back(x);
  const sim::TuneResult direct = sim::tune(
      unoverlapped, sim::Context{t, 8, {{"B", 1}, {"S", 2048}, {"NH", 96}, {"D", 128}, {"F", 49152}}},
      sim::predict_space());
  EXPECT_EQ(direct.ranked.front().name, as_written.fwd.schedule);
  EXPECT_DOUBLE_EQ(direct.ranked.front().time_us, as_written.fwd.time_us);
}

// Every field of a pass, exactly (the times compared as doubles, not near).
void expect_same_pass(const LayerPass& a, const LayerPass& b, const std::string& what) {
  EXPECT_EQ(a.schedule, b.schedule) << what;
  EXPECT_EQ(a.time_us, b.time_us) << what;
  EXPECT_EQ(a.gemm_us, b.gemm_us) << what;
  EXPECT_EQ(a.elementwise_us, b.elementwise_us) << what;
  EXPECT_EQ(a.attention_us, b.attention_us) << what;
  EXPECT_EQ(a.flash_attention, b.flash_attention) << what;
  EXPECT_EQ(a.fused_kernels, b.fused_kernels) << what;
}

// The pricer keeps the last shape's lowered plans per program and tunes them
// again (resolved in place) for a shape that lowers alike: its fp8 twin. Each
// shape, priced in a sequence that reuses plans where the key matches and
// must not where any of sizes, tp, sequence parallelism, TP overlap or the
// kernels allowed differ, prices exactly as a pricer of its own that lowers
// it afresh; the twin does not lower again.
TEST(StepLayerBlock, ReusedPlansPriceExactlyAsAFreshLowering) {
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "1"}});
  const auto fp8 = [](LayerShape x) {
    x.fp8 = true;
    return x;
  };
  const auto micro_batch = [](LayerShape x, std::int64_t b) {
    x.micro_batch = b;
    return x;
  };
  LayerShape no_kernels = gpt_layer(4, false, false);
  no_kernels.flash_attention = no_kernels.fused_kernels = false;
  const std::vector<std::pair<std::string, LayerShape>> sequence = {
      {"tp 4", gpt_layer(4, false, false)},
      {"tp 4 fp8 (reuses)", fp8(gpt_layer(4, false, false))},
      {"tp 2 fp8", fp8(gpt_layer(2, false, false))},
      {"tp 2 fp8, micro-batch 2", fp8(micro_batch(gpt_layer(2, false, false), 2))},
      {"tp 2 micro-batch 2 (reuses)", micro_batch(gpt_layer(2, false, false), 2)},
      {"tp 2 sequence parallel", gpt_layer(2, true, false)},
      {"tp 2 TP overlap", gpt_layer(2, false, true)},
      {"tp 2 TP overlap fp8 (reuses)", fp8(gpt_layer(2, false, true))},
      {"tp 4 without the kernel choices", no_kernels},
      {"tp 1", gpt_layer(1, false, false)},
      {"tp 1 fp8 (reuses)", fp8(gpt_layer(1, false, false))},
  };
  LayerBlockPricer reusing(t);
  int reused = 0;
  for (const auto& [what, x] : sequence) {
    const int before = reusing.lowerings();
    const LayerBlock b = reusing.price(x);
    if (reusing.lowerings() == before) ++reused;
    LayerBlockPricer fresh(t);
    const LayerBlock f = fresh.price(x);
    expect_same_pass(b.fwd, f.fwd, what + ", forward");
    expect_same_pass(b.bwd, f.bwd, what + ", backward");
  }
  EXPECT_EQ(reused, 4);  // the four marked "reuses": both programs' plans kept
  EXPECT_EQ(reusing.lowerings(), 2 * (int(sequence.size()) - 4));
  // fp8 changes the prices the reused plans give.
  LayerBlockPricer p(t);
  EXPECT_NE(p.price(gpt_layer(4, false, false)).fwd.gemm_us, p.price(fp8(gpt_layer(4, false, false))).fwd.gemm_us);
}

TEST(StepLayerBlock, TheStepSaysWhichSchedulesItChoseAndTpOverlapIsAModelKey) {
  const sim::Topology t = a100(2);
  const StepReport off = predict_step(parse_model(kSmall, "s"), t);
  const StepReport on = predict_step(parse_model(kSmall, "s", {{"parallel.tp_overlap", "true"}}), t);
  EXPECT_FALSE(off.spec.parallel.tp_overlap);
  EXPECT_TRUE(on.spec.parallel.tp_overlap);
  EXPECT_FALSE(off.layer_fwd_schedule.empty());
  EXPECT_FALSE(off.layer_bwd_schedule.empty());
  // With the key the tuner takes overlapped schedules, faster by more than
  // 1% but by no more than the TP collectives they hide.
  EXPECT_NE(on.layer_fwd_schedule.find("ol("), std::string::npos) << on.layer_fwd_schedule;
  EXPECT_NE(on.layer_bwd_schedule.find("ol("), std::string::npos) << on.layer_bwd_schedule;
  const double saved = off.layer.fwd_us() + off.layer.bwd_us() - (on.layer.fwd_us() + on.layer.bwd_us());
  EXPECT_GT(saved, 0.01 * (off.layer.fwd_us() + off.layer.bwd_us()));
  EXPECT_LE(saved, (off.layer.fwd_tp_us + off.layer.bwd_tp_us) * (1 + 1e-9));
  // The layer's forward is the tuned program plus the attention dropout by formula.
  LayerBlockPricer pricer(t);
  const LayerBlock b = pricer.price(LayerShape{2, 1024, 16, 64, 4096, 2, model::DType::bf16, false, false});
  EXPECT_EQ(b.fwd.schedule, off.layer_fwd_schedule);
  EXPECT_DOUBLE_EQ(off.layer.fwd_gemm_us, b.fwd.gemm_us);
  EXPECT_DOUBLE_EQ(off.layer.fwd_tp_us, b.fwd.tp_us());
  EXPECT_GT(off.layer.fwd_elementwise_us, b.fwd.elementwise_us);
  // A value that is not a boolean names the file and line.
  const std::string e = error_of(std::string(kSmall) + "  tp_overlap: maybe\n");
  EXPECT_TRUE(has(e, "small.yaml:")) << e;
  EXPECT_TRUE(has(e, "tp_overlap")) << e;
}

TEST(StepSearch, VaryingTpOverlapTriesBoth) {
  const sim::Topology t = a100(1);
  SearchOptions o;
  o.vary_tp = o.vary_pp = o.vary_micro_batch = o.vary_schedule = o.vary_zero = o.vary_recompute = false;
  o.vary_sequence_parallel = false;
  o.keep = 10;
  const SearchResult fixed = search_layouts(parse_model(kSmall, "s"), t, o);
  o.vary_tp_overlap = true;
  const SearchResult both = search_layouts(parse_model(kSmall, "s"), t, o);
  EXPECT_EQ(both.evaluated, 2 * fixed.evaluated);
  EXPECT_EQ(both.tuned_layers, 2 * fixed.tuned_layers);
}

// ---- Megatron-LM, SC'21 Table 1 -----------------------------------------------------

TEST(StepReference, MegatronTable1WithinFifteenPercent) {
  const std::string path = model::data_root() + "/validation/reference/megatron.yaml";
  const auto rows = validation::parse_published_steps(model::read_file(path), path);
  ASSERT_EQ(rows.size(), 3u);
  const sim::Topology t = sim::load_topology("dgx-a100");
  EXPECT_EQ(t.network.nics, 8);
  EXPECT_DOUBLE_EQ(t.network.nic_Gbps, 200);
  EXPECT_DOUBLE_EQ(t.gpu.memory_GB, 85.9);  // nvidia-smi's 81920 MiB of the A100 80GB
  for (const auto& row : rows) {
    const validation::StepComparison c = validation::compare_published(row);
    std::printf("%s: predicted %.1f TFLOP/s per GPU (micro-batch %lld, %s v%d), published %.0f: %+.1f%%\n",
                row.model.c_str(), c.predicted.eq3_tflops_per_gpu, static_cast<long long>(c.predicted.spec.training.micro_batch),
                to_string(c.predicted.spec.parallel.schedule).c_str(), c.predicted.layout.virtual_stages,
                row.tflops_per_gpu, 100 * c.error());
    EXPECT_LT(std::abs(c.error()), 0.15)
        << row.model << ": predicted " << c.predicted.eq3_tflops_per_gpu << " TFLOP/s per GPU, published "
        << row.tflops_per_gpu << " (" << 100 * c.error() << "%)";
    EXPECT_TRUE(c.predicted.memory.fits()) << row.model;
  }
}

}  // namespace
}  // namespace coconet::step
