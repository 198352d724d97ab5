// Tests of the step's layout as real runs lay it out (issue 29 items 4-6,
// issue 30 item 5): uneven pipeline stages with the embedding and the loss on
// the first and last, the laid-out pipeline as the one source of the bubble,
// context parallelism, data-parallel overlap modes and one price of the
// reduction and Adam whatever the gradient dtype; each new key's errors name
// file:line.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "model/error.h"
#include "sim/collective.h"
#include "sim/topology.h"
#include "step/compose.h"
#include "step/memory.h"
#include "step/pipeline.h"
#include "step/search.h"
#include "step/spec.h"
#include "step_independent.h"
#include "step_test_model.h"

namespace coconet::step {
namespace {

using testing::a100;
using testing::kSmall;

StepReport priced(const Overrides& o, int nodes = 1, const std::string& extra = "") {
  return predict_step(parse_model(std::string(kSmall) + extra, "small.yaml", o), a100(nodes));
}

std::string error_of(const std::string& yaml, const Overrides& o = {}, int nodes = 1) {
  try {
    (void)predict_step(parse_model(yaml, "small.yaml", o), a100(nodes));
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- stages -----------------------------------------------------------------------------

TEST(StepStages, BalancedLayersPutTheShortStagesAtTheEnds) {
  // Llama 3 405B: 126 layers over 16 stages, the first and last one short (Dubey et al. 2024, 3.3.2).
  const std::vector<int> meta = balanced_stage_layers(126, 16);
  EXPECT_EQ(meta.front(), 7);
  EXPECT_EQ(meta.back(), 7);
  for (std::size_t i = 1; i + 1 < meta.size(); ++i) EXPECT_EQ(meta[i], 8);
  // Over 16 x 8 virtual stages the first holds only the embedding, the last only the output layer.
  const std::vector<int> v8 = balanced_stage_layers(126, 128);
  EXPECT_EQ(v8.front(), 0);
  EXPECT_EQ(v8.back(), 0);
  EXPECT_EQ(std::accumulate(v8.begin(), v8.end(), 0), 126);
  for (int layers = 1; layers <= 40; ++layers)
    for (int chunks = 1; chunks <= 24; ++chunks) {
      const auto l = balanced_stage_layers(layers, chunks);
      ASSERT_EQ(std::accumulate(l.begin(), l.end(), 0), layers);
      const auto [lo, hi] = std::minmax_element(l.begin(), l.end());
      EXPECT_LE(*hi - *lo, 1);
      EXPECT_EQ(l.front(), *lo) << layers << " over " << chunks;  // the first is never the longer
    }
  EXPECT_EQ(balanced_stage_layers(8, 4), (std::vector<int>{2, 2, 2, 2}));
}

TEST(StepStages, LayersThatDoNotDivideThePipelineAreLaidOut) {
  // 7 layers over 2 stages: the short one first; the slowest stage sets the pace.
  const StepReport r = priced({{"model.layers", "7"}});
  EXPECT_EQ(r.layout.chunk_layers, (std::vector<int>{3, 4}));
  EXPECT_EQ(r.slowest_stage, 1);  // 4 layers and the output layer
  EXPECT_EQ(r.stage_layers(), 4);
  EXPECT_NEAR(r.stage_fwd_us, r.chunks[1].fwd_us(), 1e-9);
  testing::expect_step_is_its_laid_out_pipeline(r, "7 layers over 2 stages");
}

TEST(StepStages, AnExplicitListIsUsedAndCheckedWithItsLine) {
  const std::string list = "pipeline:\n  layers_per_stage: [1, 7]\n";
  const StepReport r = priced({}, 1, list);
  EXPECT_EQ(r.layout.chunk_layers, (std::vector<int>{1, 7}));
  EXPECT_EQ(r.slowest_stage, 1);
  const StepReport even = priced({});
  EXPECT_GT(r.step_us, even.step_us);  // 7 layers on one stage set a slower pace than 4
  // Errors: file:line of the list.
  EXPECT_TRUE(has(error_of(std::string(kSmall) + "pipeline:\n  layers_per_stage: [1, 2, 5]\n"),
                  "small.yaml:15:")) << error_of(std::string(kSmall) + "pipeline:\n  layers_per_stage: [1, 2, 5]\n");
  EXPECT_TRUE(has(error_of(std::string(kSmall) + "pipeline:\n  layers_per_stage: [1, 2]\n"), "sums to 3"));
  EXPECT_TRUE(has(error_of(std::string(kSmall) + "pipeline:\n  layers_per_stage: [-1, 9]\n"), "small.yaml:15:"));
  EXPECT_TRUE(has(error_of(std::string(kSmall) + "pipeline:\n  layers_per_stage: 8\n"), "must be a list"));
  EXPECT_TRUE(has(error_of(std::string(kSmall) + "pipeline:\n  stages: 2\n"), "small.yaml:15:"));
  // A list whose pp an override changes is caught by the layout, naming the list.
  EXPECT_TRUE(has(error_of(std::string(kSmall) + "pipeline:\n  layers_per_stage: [4, 4]\n", {{"parallel.pp", "4"}}),
                  "small.yaml:15:"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.pp", "4"}, {"model.layers", "3"}}), "more than model.layers"));
}

TEST(StepStages, TheEmbeddingIsOnTheFirstStageAndTheLossOnTheLast) {
  const StepReport r = priced({{"parallel.pp", "4"}, {"parallel.dp", "2"}, {"parallel.tp", "1"}});
  ASSERT_EQ(r.chunks.size(), 4u);
  // Same layers everywhere: the first stage is the middle ones plus the embedding, the last plus the output layer.
  EXPECT_GT(r.chunks[0].fwd_compute_us, r.chunks[1].fwd_compute_us);
  EXPECT_DOUBLE_EQ(r.chunks[1].fwd_compute_us, r.chunks[2].fwd_compute_us);
  EXPECT_GT(r.chunks[3].fwd_compute_us, r.chunks[0].fwd_compute_us);  // the logits GEMM outweighs the lookup
  EXPECT_EQ(r.slowest_stage, 3);
  // Memory: the first and last hold a V x h / t matrix each, the middle ones none.
  const double vh = 32000.0 * 1024;
  EXPECT_NEAR(stage_parameters(r.spec, r.layout, 0) - stage_parameters(r.spec, r.layout, 1), vh, 1e-6);
  EXPECT_NEAR(stage_parameters(r.spec, r.layout, 3) - stage_parameters(r.spec, r.layout, 2), vh, 1e-6);
}

// ---- one bubble: the laid-out pipeline, equal to the closed form for equal stages ------

TEST(StepStages, TheLaidOutSpanIsTheClosedFormWhenStagesAreAlike) {
  // With every virtual stage alike the span is m (F + B) + (pp - 1) / v (F + B)
  // plus 2 (m v + pp - 1) sends (Narayanan et al. SC'21, 2.2): the composition
  // lays out and the breakdown's bubble is that closed form.
  const Overrides layouts[] = {{{"parallel.pp", "2"}},
                               {{"parallel.pp", "4"}, {"parallel.dp", "2"}, {"parallel.tp", "1"}},
                               {{"parallel.pp", "4"}, {"parallel.dp", "2"}, {"parallel.tp", "1"},
                                {"parallel.schedule", "interleaved"}, {"parallel.virtual_stages", "2"}},
                               {{"parallel.schedule", "gpipe"}}};
  for (const auto& o : layouts) {
    StepReport r = priced(o);
    const Layout& l = r.layout;
    // Make the ends like the middle: the same chunk everywhere.
    std::vector<double> f(r.chunks.size(), 1.7), b(r.chunks.size(), 3.1);
    const double m = double(l.micro_batches), v = l.virtual_stages;
    const double span = span_us(stage_orders(r.spec.parallel.schedule, l.pp, l.virtual_stages, int(m)),
                                l.virtual_stages, int(m), f, b);
    const double per_mb = v * (1.7 + 3.1);
    EXPECT_NEAR(span, m * per_mb + (l.pp - 1) / v * per_mb, 1e-9 * span);
    // The step's own stages laid out here: its time is that span and the
    // exposed data-parallel time; its bubble what the span holds beyond the
    // slowest stage and the sends.
    testing::expect_step_is_its_laid_out_pipeline(r, to_string(r.spec.parallel.schedule));
  }
}

TEST(StepStages, InFlightChunksFollowTheWarmUp) {
  // Korthikanti et al. 2022, 4.2.2: the first stage of 1F1B holds pp micro-batches, interleaved
  // 1 + (pp - 1) / (pp v) times its layers' worth more; GPipe all m.
  EXPECT_EQ(chunks_in_flight(PipeSchedule::one_f_one_b, 4, 1, 8, 0), 4);
  EXPECT_EQ(chunks_in_flight(PipeSchedule::one_f_one_b, 4, 1, 8, 3), 1);
  EXPECT_EQ(chunks_in_flight(PipeSchedule::one_f_one_b, 4, 1, 2, 0), 2);
  EXPECT_EQ(chunks_in_flight(PipeSchedule::gpipe, 4, 1, 8, 2), 8);
  const int pp = 4, v = 2;
  const double layers_worth = double(chunks_in_flight(PipeSchedule::interleaved, pp, v, 8, 0)) / v;
  EXPECT_NEAR(layers_worth, pp * (1 + double(pp - 1) / (pp * v)), 1e-12);
}

// ---- context parallelism ----------------------------------------------------------------

TEST(StepContext, CpDividesActivationsAndPricesTheKvExchangeThroughSim) {
  const StepReport one = priced({{"parallel.dp", "2"}, {"parallel.pp", "2"}}, 1);
  const StepReport ring = priced({{"parallel.dp", "1"}, {"parallel.cp", "2"}, {"parallel.pp", "2"}}, 1);
  const StepReport ag =
      priced({{"parallel.dp", "1"}, {"parallel.cp", "2"}, {"parallel.cp_comm", "allgather"}, {"parallel.pp", "2"}}, 1);
  EXPECT_EQ(ring.layout.cp, 2);
  EXPECT_LT(ring.memory.activations_GB, 0.6 * one.memory.activations_GB);  // s / cp tokens (the logits too)
  EXPECT_GT(ag.breakdown.cp_comm_us, 0);
  EXPECT_GT(ring.breakdown.cp_comm_us, 0);  // on DGX A100 the send outlasts the block
  EXPECT_DOUBLE_EQ(one.breakdown.cp_comm_us, 0);
  // The all-gather's forward is the allgather of 2 cp chunks of K/V over the CP group, tp apart, as sim prices it.
  const sim::Topology t = a100(1);
  sim::CollectiveRequest req;
  req.op = model::OpKind::allgather;
  req.bytes = 2.0 /*micro-batch*/ * 512 * 2 * (16 / 2) * 64 * 2 /*bf16*/ * 2;
  req.where = sim::place_strided(t, 2, 2);
  EXPECT_NEAR(ag.layer.fwd_cp_us, sim::predict_collective(t, req).time_us(), 1e-9);
  // The ring hides its sends behind the attention blocks: what it leaves
  // exposed is the send (K/V forward, K/V and their gradients backward, to
  // the rank tp apart) less a block of attention, which the links do not
  // change. With 12, 2 and 1 NVLink links the send, priced here, grows
  // from 23 us to 119 us forward; the exposed time grows by the same amount
  // and the hidden part stays one positive block.
  sim::CollectiveRequest send;
  send.op = model::OpKind::send;
  send.bytes = req.bytes / 2;
  std::vector<double> hidden_fwd, hidden_bwd;
  for (const char* links : {"12", "2", "1"}) {
    const sim::Topology tl = sim::load_topology("dgx-a100", {{"nodes", "1"}, {"node.nvlink_links", links}});
    const StepReport r = predict_step(
        parse_model(kSmall, "small.yaml", {{"parallel.dp", "1"}, {"parallel.cp", "2"}, {"parallel.pp", "2"}}), tl);
    send.where = sim::place_send(tl, 2);
    sim::CollectiveRequest both = send;
    both.bytes = 2 * send.bytes;
    hidden_fwd.push_back(sim::predict_collective(tl, send).time_us() - r.layer.fwd_cp_us);
    hidden_bwd.push_back(sim::predict_collective(tl, both).time_us() - r.layer.bwd_cp_us);
  }
  for (const auto* hidden : {&hidden_fwd, &hidden_bwd}) {
    EXPECT_GT(hidden->front(), 1.0);
    for (double h : *hidden) EXPECT_NEAR(h, hidden->front(), 1e-6);
  }
  // The model's FLOPs do not change; each GPU's layer does half the queries.
  EXPECT_DOUBLE_EQ(ring.model_flops, one.model_flops);
  EXPECT_LT(ring.layer.fwd_gemm_us, one.layer.fwd_gemm_us);
  // Errors name the parallel section.
  const std::string odd =
      error_of(kSmall, {{"parallel.cp", "4"}, {"parallel.dp", "1"}, {"parallel.pp", "1"}, {"model.sequence", "1020"}});
  EXPECT_TRUE(has(odd, "small.yaml:12:") && has(odd, "2 x cp = 8 chunks")) << odd;
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.cp_comm", "tree"}}), "small.yaml:"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.cp", "0"}}), "small.yaml:"));
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.cp", "4"}, {"parallel.dp", "1"}}, 1), "more than the cluster"));
}

TEST(StepContext, FlashBlocksToOtherRanksCostTheirCausalShare) {
  // Causal load balance gives each of cp ranks (s/cp) s / 2 query-key pairs:
  // with flash attention a cp 2 rank's layer is half a cp 1 rank's (the
  // linear layers' tokens and the attention's pairs both halve), with no
  // scores' bytes. Priced as materialised blocks over every other key (the
  // GEMMs of the whole s/cp x s/cp block and its scores), a cp 2 layer of
  // Llama 3.1 8B at s 8192 came out 30% above half (0.649).
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "1"}});
  const Overrides base = {{"parallel.tp", "1"}, {"parallel.pp", "1"}, {"parallel.recompute", "none"}};
  Overrides one = base, two = base;
  one.emplace_back("parallel.dp", "8");
  two.emplace_back("parallel.dp", "4");
  two.emplace_back("parallel.cp", "2");
  const LayerTimes a = predict_step(load_model("llama3.1-8b", one), t).layer;
  const LayerTimes b = predict_step(load_model("llama3.1-8b", two), t).layer;
  const double whole = a.fwd_gemm_us + a.fwd_elementwise_us + a.bwd_gemm_us + a.bwd_elementwise_us;
  const double half = b.fwd_gemm_us + b.fwd_elementwise_us + b.bwd_gemm_us + b.bwd_elementwise_us;
  EXPECT_NEAR(half / whole, 0.5, 0.02) << "cp 1 " << whole << " us, cp 2 " << half << " us";
}

TEST(StepContext, RankOrderPlacesGroupsAsMegatron) {
  // TP innermost, then CP, DP, PP: on 8-GPU nodes with tp 8 a CP group of 2 is 2 nodes, one GPU each.
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "4"}});
  const sim::Placement cp = sim::place_strided(t, 2, 8);
  EXPECT_EQ(cp.nodes, 2);
  EXPECT_EQ(cp.per_node, 1);
  const sim::Placement dp = sim::place_strided(t, 8, 2);  // tp 2: 4 of the group per node
  EXPECT_EQ(dp.per_node, 4);
  EXPECT_EQ(dp.nodes, 2);
  const sim::Placement packed = sim::place_strided(t, 8, 1);
  const sim::Placement plain = sim::place(t, 8);
  EXPECT_EQ(packed.nodes, plain.nodes);
  EXPECT_EQ(packed.per_node, plain.per_node);
  EXPECT_TRUE(sim::place_send(t, 8).send_crosses_nodes);
  EXPECT_FALSE(sim::place_send(t, 4).send_crosses_nodes);
}

TEST(StepContext, TheSearchTriesContextParallelism) {
  const ModelSpec s = parse_model(kSmall, "small.yaml");
  SearchOptions o;
  o.keep = 100000;
  const SearchResult r = search_layouts(s, a100(1), o);
  bool ring = false, ag = false;
  for (const StepReport& x : r.best) {
    ring = ring || (x.layout.cp > 1 && x.spec.parallel.cp_comm == CpComm::ring);
    ag = ag || (x.layout.cp > 1 && x.spec.parallel.cp_comm == CpComm::allgather);
  }
  EXPECT_TRUE(ring);
  EXPECT_TRUE(ag);
  o.vary_cp = false;
  const SearchResult fixed = search_layouts(s, a100(1), o);
  for (const StepReport& x : fixed.best) EXPECT_EQ(x.layout.cp, 1);
}

// ---- data parallelism -----------------------------------------------------------------

TEST(StepDataParallel, F32ReductionIsNeverFasterThanBf16) {
  // One path (the adam workload through the tuner) whatever the gradient
  // dtype: f32 gradients move twice the bytes, so never less time.
  for (const char* zero : {"0", "1", "2", "3"})
    for (int nodes : {1, 2, 4}) {
      const Overrides base{{"parallel.zero", zero}, {"parallel.pp", "1"}, {"parallel.dp", std::to_string(4 * nodes)}};
      Overrides f32 = base;
      f32.emplace_back("training.grad_dtype", "f32");
      const StepReport b = priced(base, nodes), f = priced(f32, nodes);
      EXPECT_GE(f.dp_total_us, b.dp_total_us) << "ZeRO " << zero << ", " << nodes << " nodes";
      EXPECT_GE(f.step_us, b.step_us) << "ZeRO " << zero << ", " << nodes << " nodes";
      EXPECT_FALSE(f.dp_schedule.empty());
    }
}

TEST(StepDataParallel, OverlapHidesTheReductionAndItsAbsenceExposesAll) {
  for (const char* zero : {"0", "1", "2", "3"}) {
    const StepReport on = priced({{"parallel.zero", zero}, {"parallel.pp", "1"}, {"parallel.dp", "8"}}, 2);
    const StepReport off = priced(
        {{"parallel.zero", zero}, {"parallel.pp", "1"}, {"parallel.dp", "8"}, {"parallel.dp_overlap", "false"}}, 2);
    EXPECT_DOUBLE_EQ(off.breakdown.dp_comm_us, off.dp_total_us) << zero;
    EXPECT_LT(on.breakdown.dp_comm_us, off.breakdown.dp_comm_us) << zero;
    EXPECT_DOUBLE_EQ(on.dp_total_us, off.dp_total_us) << zero;
  }
  EXPECT_TRUE(has(error_of(kSmall, {{"parallel.dp_overlap", "maybe"}}), "small.yaml:"));
}

TEST(StepDataParallel, OneRankRunsAdamWithoutACollective) {
  // dp 1: the adam workload's computation alone, no collective, still through the tuner.
  const StepReport r = priced({{"parallel.dp", "1"}, {"parallel.pp", "2"}, {"parallel.tp", "4"}});
  EXPECT_GT(r.dp_total_us, 0);
  EXPECT_FALSE(r.dp_schedule.empty());
  EXPECT_DOUBLE_EQ(r.breakdown.optimizer_us, 0);
}

}  // namespace
}  // namespace coconet::step
