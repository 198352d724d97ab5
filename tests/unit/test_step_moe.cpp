// Mixtures of experts in `coconet step` (issue 32): the moe section and
// parallel.ep / etp parse, and each impossible value or layout names its
// file:line; Megatron-core's expert layout (expert data parallelism is what
// is left of tp x cp x dp); an MoE layer priced through the MoE programs
// (the exposed all-to-all its own line, the hottest expert setting the
// time, one rank paying no all-to-all); expert memory divided by ep x etp
// and ZeRO over the expert data-parallel ranks; the search over ep and etp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "model/error.h"
#include "sim/topology.h"
#include "step/compose.h"
#include "step/flops.h"
#include "step/memory.h"
#include "step/moe_block.h"
#include "step/search.h"
#include "step/spec.h"
#include "step_independent.h"
#include "step_test_model.h"
#include "step/trace.h"

namespace coconet::step {
namespace {

using testing::h100;
using testing::has;

// Line numbers matter to the error tests: experts on line 13, top_k 14,
// router 16, parallel 20, ep 22.
const char* const kMoe = R"(name: tiny-moe
model:
  layers: 4
  hidden: 1024
  heads: 16
  kv_heads: 4
  ffn: 2816
  ffn_type: swiglu
  norm: rmsnorm
  sequence: 2048
  vocabulary: 32000
moe:
  experts: 8
  top_k: 2
  expert_ffn: 1408
  router: dropless
training:
  micro_batch: 1
  global_batch: 32
parallel:
  tp: 2
  ep: 4
)";

std::string error_of(const std::string& yaml, const Overrides& o = {}, int nodes = 1) {
  try {
    (void)resolve_layout(parse_model(yaml, "moe.yaml", o), h100(nodes));
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(StepMoeKeys, TheSectionParsesWithItsDefaults) {
  const ModelSpec s = parse_model(kMoe, "moe.yaml");
  EXPECT_EQ(s.moe.experts, 8);
  EXPECT_EQ(s.moe.top_k, 2);
  EXPECT_EQ(s.moe.expert_ffn, 1408);
  EXPECT_EQ(s.moe.shared_experts, 0);
  EXPECT_EQ(s.moe.dense_layers, 0);
  EXPECT_EQ(s.moe.router, Router::dropless);
  EXPECT_DOUBLE_EQ(s.moe.imbalance, 1.0);
  EXPECT_EQ(s.parallel.ep, 4);
  EXPECT_EQ(s.parallel.etp, 0);
  EXPECT_EQ(moe_layers(s), 4);
  const ModelSpec c = parse_model(kMoe, "moe.yaml",
                                  {{"moe.router", "capacity"},
                                   {"moe.capacity_factor", "1.25"},
                                   {"moe.imbalance", "2"},
                                   {"moe.dense_layers", "1"}});
  EXPECT_DOUBLE_EQ(c.moe.hottest_share(), 1.25);  // the capacity caps the hottest expert
  EXPECT_EQ(moe_layers(c), 3);
}

TEST(StepMoeKeys, EachImpossibleValueNamesItsLine) {
  const std::string topk = error_of(kMoe, {{"moe.top_k", "9"}});
  EXPECT_TRUE(has(topk, "moe.yaml:14:")) << topk;
  EXPECT_TRUE(has(topk, "moe.top_k = 9 is more than moe.experts = 8")) << topk;
  const std::string ep = error_of(kMoe, {{"parallel.ep", "3"}});
  EXPECT_TRUE(has(ep, "moe.yaml:22:")) << ep;
  EXPECT_TRUE(has(ep, "parallel.ep = 3 does not divide moe.experts = 8")) << ep;
  const std::string router = error_of(kMoe, {{"moe.router", "greedy"}});
  EXPECT_TRUE(has(router, "moe.yaml:16:")) << router;
  EXPECT_TRUE(has(router, "not one of dropless, capacity")) << router;
  const std::string cf = error_of(kMoe, {{"moe.capacity_factor", "1.5"}});
  EXPECT_TRUE(has(cf, "needs router: capacity")) << cf;
  const std::string imb = error_of(kMoe, {{"moe.imbalance", "0.5"}});
  EXPECT_TRUE(has(imb, "moe.imbalance must be from 1")) << imb;
  const std::string dense = error_of(kMoe, {{"moe.dense_layers", "4"}});
  EXPECT_TRUE(has(dense, "moe.dense_layers must be from 0 to model.layers - 1 = 3")) << dense;
  const std::string shared = error_of(kMoe, {{"moe.shared_experts", "-1"}});
  EXPECT_TRUE(has(shared, "moe.shared_experts must be from 0")) << shared;
  const std::string unknown = error_of(kMoe, {{"moe.experts_per_rank", "2"}});
  EXPECT_TRUE(has(unknown, "experts_per_rank")) << unknown;
  const std::string gpt = error_of(
      kMoe, {{"model.ffn_type", "gelu"}, {"model.norm", "layernorm"}, {"model.kv_heads", "16"}});
  EXPECT_TRUE(has(gpt, "a moe section needs model.ffn_type swiglu")) << gpt;
  const std::string etp = error_of(kMoe, {{"parallel.etp", "3"}});
  EXPECT_TRUE(has(etp, "parallel.etp = 3 does not divide moe.expert_ffn = 1408")) << etp;
}

TEST(StepMoeKeys, ExpertParallelismNeedsExperts) {
  std::string dense = kMoe;
  dense.erase(dense.find("moe:"), dense.find("training:") - dense.find("moe:"));
  const std::string e = error_of(dense);
  EXPECT_TRUE(has(e, "parallel.ep needs a moe section")) << e;
  EXPECT_EQ(error_of(dense, {{"parallel.ep", "1"}}), "");
}

// Megatron-core's MoE parallel folding: the experts' ep x etp ranks fold
// over the tp x cp x dp ranks of a pipeline stage; expert data parallelism is
// what is left, and must be whole.
TEST(StepMoeLayout, ExpertDataParallelismIsWhatIsLeft) {
  const Layout l = resolve_layout(parse_model(kMoe, "moe.yaml"), h100(1));  // 8 GPUs: dp 4 x tp 2
  EXPECT_EQ(l.ep, 4);
  EXPECT_EQ(l.etp, 2);  // tp unless parallel.etp says
  EXPECT_EQ(l.edp, 1);
  const Layout one =
      resolve_layout(parse_model(kMoe, "moe.yaml", {{"parallel.etp", "1"}}), h100(1));
  EXPECT_EQ(one.edp, 2);
  // ep 8 x etp 2 = 16 ranks do not fit the 8 of a stage (tp 2 x dp 4); file:line of parallel.ep.
  const std::string e = error_of(kMoe, {{"parallel.ep", "8"}});
  EXPECT_TRUE(has(e, "moe.yaml:22:")) << e;
  EXPECT_TRUE(has(e, "ep x etp = 8 x 2 = 16 does not divide the 8 ranks of a pipeline stage")) << e;
  // With a pipeline of 2 a stage has 4 ranks: ep 4 x etp 2 does not fit either.
  const std::string pp = error_of(kMoe, {{"parallel.pp", "2"}});
  EXPECT_TRUE(has(pp, "does not divide the 4 ranks of a pipeline stage")) << pp;
  EXPECT_EQ(error_of(kMoe, {{"parallel.pp", "2"}, {"parallel.etp", "1"}}), "");
}

// ---- pricing ------------------------------------------------------------------------

StepReport priced(const Overrides& o, int nodes = 1) {
  return predict_step(parse_model(kMoe, "moe.yaml", o), h100(nodes));
}

// The dispatch and combine all-to-alls are their own line of the breakdown,
// part of the step time (the stages laid out with them span it); on one expert-parallel rank none runs.
TEST(StepMoePricing, TheExposedAllToAllIsItsOwnLine) {
  const StepReport r = priced({{"parallel.etp", "1"}});
  EXPECT_GT(r.breakdown.ep_comm_us, 0);
  EXPECT_GT(r.moe_layer.fwd_a2a_us, 0);
  EXPECT_GT(r.moe_layer.bwd_a2a_us, 0);
  testing::expect_step_is_its_laid_out_pipeline(r, "ep 8");
  EXPECT_EQ(r.breakdown.ep_comm_us, double(r.layout.micro_batches) * r.layout.layers_of_stage(0) *
                                        (r.moe_layer.fwd_a2a_us + r.moe_layer.bwd_a2a_us));
  EXPECT_FALSE(r.moe_fwd_schedule.empty());
  const StepReport one = priced({{"parallel.ep", "1"}, {"parallel.etp", "1"}});
  EXPECT_EQ(one.breakdown.ep_comm_us, 0);
  EXPECT_EQ(one.moe_layer.fwd_a2a_us, 0);
}

// Across nodes the all-to-all goes over the NICs: ep 16 over two nodes
// exposes more per layer than ep 8 within one.
TEST(StepMoePricing, AnAllToAllAcrossNodesCostsMore) {
  const Overrides o{{"moe.experts", "16"}, {"parallel.etp", "1"}, {"parallel.tp", "1"}};
  Overrides in = o, across = o;
  in.emplace_back("parallel.ep", "8");
  across.emplace_back("parallel.ep", "16");
  const StepReport a = priced(in, 2), b = priced(across, 2);
  EXPECT_GT(b.moe_layer.fwd_a2a_us, 2 * a.moe_layer.fwd_a2a_us);
}

// The hottest expert sets the time: an imbalance of 2 doubles its slots,
// raising the grouped GEMMs and the all-to-all; a capacity router caps it.
TEST(StepMoePricing, TheHottestExpertSetsTheTime) {
  const StepReport even = priced({{"parallel.etp", "1"}});
  const StepReport skew = priced({{"parallel.etp", "1"}, {"moe.imbalance", "2"}});
  EXPECT_GT(skew.moe_layer.fwd_gemm_us,
            1.5 * (even.moe_layer.fwd_gemm_us - even.layer.fwd_gemm_us));
  EXPECT_GT(skew.moe_layer.fwd_a2a_us, 1.5 * even.moe_layer.fwd_a2a_us);
  EXPECT_GT(skew.step_us, even.step_us);
  const StepReport capped = priced({{"parallel.etp", "1"},
                                    {"moe.imbalance", "2"},
                                    {"moe.router", "capacity"},
                                    {"moe.capacity_factor", "1"}});
  EXPECT_NEAR(capped.moe_layer.fwd_a2a_us, even.moe_layer.fwd_a2a_us,
              1e-9 * even.moe_layer.fwd_a2a_us);
}

// The MoE programs' sizes: each rank's tokens (micro-batch x sequence / tp),
// the hottest expert's slots, the expert ffn over etp.
TEST(StepMoePricing, TheProgramsAreBoundToTheStepsShapes) {
  const ModelSpec s =
      parse_model(kMoe, "moe.yaml", {{"parallel.etp", "1"}, {"moe.imbalance", "1.5"}});
  const MoeShape x = step_moe_shape(s, resolve_layout(s, h100(1)));
  EXPECT_EQ(x.tokens, 2048 / 2 * 4);         // s / tp per rank, over ep 4
  EXPECT_EQ(x.slots, 4096 * 2 / 8 * 3 / 2);  // T K / E x 1.5
  EXPECT_EQ(x.ffn, 1408);
  EXPECT_EQ(x.ep, 4);
}

// Dense layers (moe.dense_layers) are priced as a dense model's.
TEST(StepMoePricing, DenseLayersArePricedAsToday) {
  const StepReport r = priced({{"parallel.etp", "1"}, {"moe.dense_layers", "1"}});
  ASSERT_EQ(r.chunks.size(), 1u);
  const ChunkTimes& c = r.chunks[0];
  EXPECT_NEAR(c.fwd_a2a_us, 3 * r.moe_layer.fwd_a2a_us, 1e-9 * c.fwd_a2a_us);
  EXPECT_GT(r.layer.fwd_gemm_us, 0);
}

// ---- memory -------------------------------------------------------------------------

// The routed experts' weights, gradients and optimizer state are divided by
// ep x etp; ZeRO shards them over the expert data-parallel ranks.
TEST(StepMoeMemory, ExpertsAreDividedByEpTimesEtpAndShardedOverExpertDp) {
  const sim::Topology t = h100(1);
  const ModelSpec s4 = parse_model(kMoe, "moe.yaml", {{"parallel.etp", "1"}});
  const ModelSpec s2 = parse_model(kMoe, "moe.yaml", {{"parallel.etp", "1"}, {"parallel.ep", "2"}});
  const Layout l4 = resolve_layout(s4, t), l2 = resolve_layout(s2, t);
  EXPECT_DOUBLE_EQ(stage_expert_parameters(s4, l4), 4 * 8 * 3.0 * 1024 * 1408 / 4);
  EXPECT_DOUBLE_EQ(stage_expert_parameters(s2, l2), 2 * stage_expert_parameters(s4, l4));
  // ZeRO 1: the optimizer state of the experts over expert dp (2 at ep 4, 4 at ep 2).
  const ModelSpec z =
      parse_model(kMoe, "moe.yaml", {{"parallel.etp", "1"}, {"parallel.zero", "1"}});
  const Layout lz = resolve_layout(z, t);
  const Memory m = memory_per_gpu(z, lz, t);
  const double expected =
      (stage_parameters(z, lz) / lz.dp + stage_expert_parameters(z, lz) / lz.edp) * 12 / 1e9;
  EXPECT_NEAR(m.optimizer_GB, expected, 1e-9);
  // Dispatched activations: an MoE layer keeps more than the dense layer of the same ffn at
  // top_k 2.
  EXPECT_GT(layer_activation_bytes(s4, l4, AttentionMemory::flash, true), 0);
}

// ZeRO 3 gathers each layer's routed experts over the expert data-parallel
// group (and reduce-scatters their gradients a layer at a time), beside the
// layer's dense part over the data-parallel group: what it adds to ZeRO 1
// grows with the experts (the dense model's MLP, which an MoE layer does not
// have, was gathered in their place), and the buffer it holds is the largest
// layer's, experts included.
TEST(StepMoeMemory, ZeroThreeGathersEachLayersExperts) {
  const auto zero3_extra = [](const char* ffn) {
    const Overrides o1 = {{"parallel.etp", "1"}, {"parallel.zero", "1"}, {"moe.expert_ffn", ffn}};
    Overrides o3 = o1;
    o3[1] = {"parallel.zero", "3"};
    return priced(o3).dp_total_us - priced(o1).dp_total_us;
  };
  const double one = zero3_extra("1408"), two = zero3_extra("2816");
  EXPECT_GT(one, 0);
  EXPECT_GT(two, 1.5 * one) << one << " us, then " << two << " us with experts twice as wide";
  const sim::Topology t = h100(1);
  const ModelSpec s = parse_model(kMoe, "moe.yaml", {{"parallel.etp", "1"}, {"parallel.zero", "3"}});
  const Layout l = resolve_layout(s, t);
  const LayerShards x = layer_shards(s, l, 0);
  EXPECT_DOUBLE_EQ(x.experts, 8 * 3.0 * 1024 * 1408 / 4);
  EXPECT_DOUBLE_EQ(x.largest(), moe_layer_dense_parameters(s) / 2 + x.experts);
  const double sharded = stage_parameters(s, l) / l.dp + stage_expert_parameters(s, l) / l.edp;
  EXPECT_NEAR(memory_per_gpu(s, l, t).weights_GB, (sharded + x.largest()) * 2 / 1e9, 1e-12);
}

// FLOPs count each token's top_k experts (and the router), not every expert.
TEST(StepMoeFlops, ModelFlopsCountTheActiveExperts) {
  const ModelSpec s = parse_model(kMoe, "moe.yaml");
  const ModelSpec k1 = parse_model(kMoe, "moe.yaml", {{"moe.top_k", "1"}});
  const double per_token_expert = 2.0 * 3 * 1024 * 1408;
  EXPECT_NEAR(moe_layer_forward_flops_per_token(s) - moe_layer_forward_flops_per_token(k1),
              per_token_expert, 1e-6);
}

// moe.shared_expert_overlap: each pass's all-to-alls hide behind the shared
// experts' kernels of the same pass (at most what those take, at least the
// SMs the dispatcher holds), the compute unchanged; it needs shared experts.
TEST(StepMoePricing, TheSharedExpertsHideTheAllToAllsBesideThem) {
  const Overrides shared = {{"parallel.etp", "1"}, {"moe.shared_experts", "1"}};
  Overrides overlapped = shared;
  overlapped.push_back({"moe.shared_expert_overlap", "true"});
  const StepReport a = priced(shared), b = priced(overlapped);
  EXPECT_EQ(b.moe_layer.fwd_gemm_us, a.moe_layer.fwd_gemm_us);
  EXPECT_EQ(b.moe_layer.bwd_gemm_us, a.moe_layer.bwd_gemm_us);
  EXPECT_LT(b.moe_layer.fwd_a2a_us, a.moe_layer.fwd_a2a_us);
  EXPECT_LT(b.moe_layer.bwd_a2a_us, a.moe_layer.bwd_a2a_us);
  EXPECT_GT(b.moe_layer.fwd_a2a_us, 0);
  EXPECT_LT(b.step_us, a.step_us);
  // Without shared experts it has nothing to run beside the all-to-alls.
  const std::string none = error_of(kMoe, {{"moe.shared_expert_overlap", "true"}});
  EXPECT_TRUE(has(none, "moe.shared_expert_overlap needs moe.shared_experts")) << none;
}

// recompute moe (Megatron-core's recompute_modules moe): each MoE layer keeps
// nothing of its MLP and runs it again in the backward, its all-to-alls
// included; the FLOPs count the router and experts again; a model without
// experts refuses it, and --search tries it for one with them.
TEST(StepMoePricing, RecomputingTheMoeRunsItsMlpAndAllToAllsAgain) {
  const Overrides none = {{"parallel.etp", "1"}};
  Overrides again = none;
  again.push_back({"parallel.recompute", "moe"});
  const StepReport a = priced(none), b = priced(again);
  const double mlp = b.moe_layer.fwd_gemm_us + b.moe_layer.fwd_elementwise_us - (a.layer.fwd_gemm_us + a.layer.fwd_elementwise_us);
  EXPECT_GT(b.moe_layer.recompute_us, 0);
  EXPECT_NEAR(b.moe_layer.recompute_us, mlp, 0.05 * mlp);
  ASSERT_EQ(b.chunks.size(), 1u);
  EXPECT_NEAR(b.chunks[0].recompute_a2a_us, 4 * b.moe_layer.fwd_a2a_us, 1e-9 * b.chunks[0].recompute_a2a_us);
  EXPECT_GT(b.step_us, a.step_us);
  const sim::Topology t = h100(1);
  const ModelSpec s0 = parse_model(kMoe, "moe.yaml", none), s1 = parse_model(kMoe, "moe.yaml", again);
  const Layout l = resolve_layout(s1, t);
  EXPECT_LT(layer_activation_bytes(s1, l, AttentionMemory::flash, true),
            layer_activation_bytes(s0, l, AttentionMemory::flash, true));
  EXPECT_EQ(layer_activation_bytes(s1, l, AttentionMemory::flash, false),
            layer_activation_bytes(s0, l, AttentionMemory::flash, false));
  EXPECT_NEAR(hardware_flops(s1) - hardware_flops(s0), 32.0 * 2048 * 4 * moe_mlp_forward_flops_per_token(s1),
              1e-9 * hardware_flops(s1));
  SearchOptions o;
  o.vary_micro_batch = o.vary_tp = o.vary_cp = o.vary_pp = o.vary_schedule = o.vary_zero = false;
  o.vary_sequence_parallel = o.vary_precision = o.vary_ep = false;
  o.keep = 10;
  bool tried = false;
  for (const StepReport& r : search_layouts(s0, t, o).best) tried = tried || r.spec.parallel.recompute == Recompute::moe;
  EXPECT_TRUE(tried);
}

// ---- multi-token prediction (model.mtp_layers) ---------------------------------------

// Each depth runs on the last stage: one more layer with experts (its
// all-to-alls too) and the module around it (an embedding lookup, two norms,
// the 2h -> h projection and a pass of the output layer); the first stage is
// untouched.
TEST(StepMtp, TheLastStageRunsOneMoreLayerAndTheModule) {
  const Overrides pp2 = {{"parallel.etp", "1"}, {"parallel.pp", "2"}};
  Overrides with = pp2;
  with.push_back({"model.mtp_layers", "1"});
  const StepReport r0 = priced(pp2, 2), r1 = priced(with, 2);
  ASSERT_EQ(r1.chunks.size(), 2u);
  EXPECT_EQ(r1.chunks[0].fwd_us(), r0.chunks[0].fwd_us());
  EXPECT_EQ(r1.chunks[0].bwd_us(), r0.chunks[0].bwd_us());
  const ChunkTimes &a = r0.chunks[1], &b = r1.chunks[1];
  EXPECT_NEAR(b.fwd_a2a_us - a.fwd_a2a_us, r1.moe_layer.fwd_a2a_us, 1e-9 * b.fwd_a2a_us);
  EXPECT_NEAR(b.bwd_a2a_us - a.bwd_a2a_us, r1.moe_layer.bwd_a2a_us, 1e-9 * b.bwd_a2a_us);
  const double layer_fwd = r1.moe_layer.fwd_gemm_us + r1.moe_layer.fwd_elementwise_us;
  const double layer_bwd = r1.moe_layer.bwd_gemm_us + r1.moe_layer.bwd_elementwise_us;
  // The module beside the layer: the output layer's pass again (what the
  // chunk without it runs beyond its layers) and a few smaller kernels.
  const double out_fwd = a.fwd_compute_us - a.layers * layer_fwd;
  const double module_fwd = b.fwd_compute_us - a.fwd_compute_us - layer_fwd;
  const double module_bwd = b.bwd_compute_us - a.bwd_compute_us - layer_bwd;
  EXPECT_GT(module_fwd, out_fwd);
  EXPECT_LT(module_fwd, out_fwd + layer_fwd);
  EXPECT_GT(module_bwd, module_fwd);
  EXPECT_GT(r1.step_us, r0.step_us);
}

// The module's parameters sit on the last stage (its layer's dense part and
// experts, the projection 2h x h, two norms and, with pp > 1, a copy of the
// embedding); its GEMMs count in the model's FLOPs.
TEST(StepMtp, ItsParametersAndFlopsAreCounted) {
  const sim::Topology t = h100(2);
  const Overrides pp2 = {{"parallel.etp", "1"}, {"parallel.pp", "2"}};
  Overrides with = pp2;
  with.push_back({"model.mtp_layers", "1"});
  const ModelSpec s0 = parse_model(kMoe, "moe.yaml", pp2), s1 = parse_model(kMoe, "moe.yaml", with);
  const Layout l0 = resolve_layout(s0, t), l1 = resolve_layout(s1, t);
  const double h = 1024, tp = 2;
  const double module = moe_layer_dense_parameters(s1) + 2 * h * h + 2 * norm_parameters(s1.model);
  EXPECT_DOUBLE_EQ(stage_parameters(s1, l1, 1) - stage_parameters(s0, l0, 1), (module + 32000 * h) / tp);
  EXPECT_DOUBLE_EQ(stage_parameters(s1, l1, 0), stage_parameters(s0, l0, 0));
  EXPECT_DOUBLE_EQ(stage_expert_parameters(s1, l1, 1) - stage_expert_parameters(s0, l0, 1),
                   8 * 3.0 * h * 1408 / 4);
  const double tokens = 32.0 * 2048, logits = 2 * h * 32000;
  EXPECT_NEAR(model_flops(s1) - model_flops(s0),
              tokens * 3 * (moe_layer_forward_flops_per_token(s1) + 2 * 2 * h * h + logits), 1e-9 * model_flops(s1));
  EXPECT_GT(memory_per_gpu(s1, l1, t).activations_GB, memory_per_gpu(s0, l0, t).activations_GB);
}

TEST(StepMtp, ADepthOutsideOneToSixteenNamesItsLine) {
  const std::string zero = error_of(kMoe, {{"model.mtp_layers", "0"}});
  EXPECT_TRUE(has(zero, "model.mtp_layers must be a whole number from 1 to 16, got 0")) << zero;
  const std::string many = error_of(kMoe, {{"model.mtp_layers", "17"}});
  EXPECT_TRUE(has(many, "got 17")) << many;
}

// ---- the search ---------------------------------------------------------------------

// A search of the tiny model kept short: the model's micro-batch, no cp,
// its precision only; the 20 fastest kept.
SearchOptions short_search() {
  SearchOptions o;
  o.vary_micro_batch = false;
  o.vary_cp = false;
  o.vary_precision = false;
  o.keep = 20;
  return o;
}

// --search tries ep and etp: the best layouts fit and some use ep > 1.
TEST(StepMoeSearch, TheSearchTriesExpertLayouts) {
  const SearchOptions o = short_search();
  const SearchResult r = search_layouts(parse_model(kMoe, "moe.yaml"), h100(1), o);
  ASSERT_FALSE(r.best.empty());
  bool some_ep = false, some_etp = false;
  for (const StepReport& b : r.best) {
    EXPECT_TRUE(b.memory.fits());
    EXPECT_EQ(8 % b.layout.ep, 0);
    EXPECT_EQ((b.layout.tp * b.layout.cp * b.layout.dp) % (b.layout.ep * b.layout.etp), 0);
    some_ep = some_ep || b.layout.ep > 1;
    some_etp = some_etp || b.layout.etp != b.layout.tp;
  }
  EXPECT_TRUE(some_ep);
  (void)some_etp;
}

// The search runs each layout with the MoE overlaps it allows (the 1F1B
// all-to-all overlap off GPipe, the shared experts beside the all-to-alls):
// in the model neither is ever slower nor holds memory, which is checked
// here layout by layout against the same layout with both off. With
// vary_moe_overlap false the file's settings stand.
TEST(StepMoeSearch, EachLayoutRunsTheMoeOverlapsItAllows) {
  SearchOptions o = short_search();
  const ModelSpec base = parse_model(kMoe, "moe.yaml", {{"moe.shared_experts", "1"}});
  const sim::Topology t = h100(2);
  const SearchResult r = search_layouts(base, t, o);
  ASSERT_FALSE(r.best.empty());
  bool some_1f1b = false;
  for (const StepReport& b : r.best) {
    const bool gpipe = b.spec.parallel.schedule == PipeSchedule::gpipe;
    some_1f1b = some_1f1b || !gpipe;
    EXPECT_EQ(b.spec.moe.a2a_overlap, !gpipe);
    EXPECT_TRUE(b.spec.moe.shared_expert_overlap);
    ModelSpec off = b.spec;
    off.moe.a2a_overlap = off.moe.shared_expert_overlap = false;
    const StepReport plain = predict_step(off, t);
    EXPECT_LE(b.step_us, plain.step_us);
    EXPECT_EQ(b.memory.total_GB(), plain.memory.total_GB());
  }
  EXPECT_TRUE(some_1f1b);
  o.vary_moe_overlap = false;
  for (const StepReport& b : search_layouts(base, t, o).best) {
    EXPECT_FALSE(b.spec.moe.a2a_overlap);
    EXPECT_FALSE(b.spec.moe.shared_expert_overlap);
  }
}

// --trace draws each chunk step's exposed all-to-all on the communication
// thread: over the slowest stage they add up to the breakdown's line, and the
// trace still ends at the step time.
TEST(StepMoeTrace, TheAllToAllIsDrawnAndAddsUpToItsLine) {
  const StepReport r = priced({{"parallel.etp", "1"}, {"parallel.pp", "2"}, {"parallel.ep", "2"}});
  double a2a = 0, end = 0;
  for (const TraceEvent& e : step_trace_events(r)) {
    if (e.category == std::string("ep") && e.stage == r.slowest_stage) a2a += e.dur_us;
    end = std::max(end, e.start_us + e.dur_us);
  }
  EXPECT_GT(a2a, 0);
  EXPECT_NEAR(a2a, r.breakdown.ep_comm_us, 1e-6 * a2a);
  EXPECT_NEAR(end, r.step_us, 1e-6 * end);
}

// The deepep dispatcher: over an expert-parallel group of 4 nodes each token
// crosses InfiniBand once per remote node it targets (fewer bytes than the
// all-to-all's copy per expert), fewer with node-limited routing
// (moe.max_nodes); on one node it prices as the all-to-all.
TEST(StepMoePricing, DeepEpSendsATokenOncePerRemoteNodeAndMaxNodesLimitsThem) {
  const Overrides o{{"moe.experts", "32"}, {"moe.top_k", "8"},    {"parallel.etp", "1"},
                    {"parallel.tp", "1"},  {"parallel.ep", "32"}, {"training.global_batch", "64"}};
  Overrides deepep = o, four = o, one = o;
  deepep.emplace_back("moe.dispatcher", "deepep");
  four.emplace_back("moe.dispatcher", "deepep");
  four.emplace_back("moe.max_nodes", "4");
  one.emplace_back("moe.dispatcher", "deepep");
  one.emplace_back("moe.max_nodes", "1");
  const StepReport all = priced(o, 4), dedup = priced(deepep, 4), limited4 = priced(four, 4),
                   limited1 = priced(one, 4);
  EXPECT_LT(dedup.moe_layer.fwd_a2a_us, all.moe_layer.fwd_a2a_us);
  EXPECT_EQ(limited4.moe_layer.fwd_a2a_us,
            dedup.moe_layer.fwd_a2a_us);  // 4 nodes: no tighter than the group
  EXPECT_LT(limited1.moe_layer.fwd_a2a_us, limited4.moe_layer.fwd_a2a_us);
  EXPECT_GT(limited1.moe_layer.fwd_a2a_us, 0);
  const std::string alone = error_of(kMoe, {{"moe.max_nodes", "2"}});
  EXPECT_TRUE(has(alone, "moe.max_nodes needs dispatcher: deepep")) << alone;
  const std::string bad = error_of(kMoe, {{"moe.dispatcher", "deepep"}, {"moe.max_nodes", "0"}});
  EXPECT_TRUE(has(bad, "moe.max_nodes must be a whole number from 1")) << bad;
}

// NCCL's all-to-all (the alltoall dispatcher) runs at the share of the
// links' rates it was measured to reach (nccl.alltoall_efficiency), DeepEP's
// kernels at the full rates (step::deepep_topology): within a node DeepEP's
// intranode kernels move the same copies as the MoE programs' all-to-all,
// faster; with the shares at 1 the two dispatchers price a node alike, and
// across nodes DeepEP's hops do not move with NCCL's shares.
TEST(StepMoePricing, NcclsAllToAllRunsAtItsMeasuredShareAndDeepEpsAtTheLinksRate) {
  const sim::Topology t = h100(4);
  ASSERT_LT(t.nccl.alltoall_efficiency.nvlink, 1.0);
  sim::Topology full = t;
  full.nccl.alltoall_efficiency = {};
  const auto a2a_us = [](const sim::Topology& topo, const Overrides& o) {
    return predict_step(parse_model(kMoe, "moe.yaml", o), topo).moe_layer.fwd_a2a_us;
  };
  const Overrides nccl{{"parallel.etp", "1"}}, deepep{{"parallel.etp", "1"}, {"moe.dispatcher", "deepep"}};
  EXPECT_LT(a2a_us(t, deepep), a2a_us(t, nccl));
  EXPECT_LT(a2a_us(full, nccl), a2a_us(t, nccl));
  EXPECT_EQ(a2a_us(full, deepep), a2a_us(full, nccl));
  EXPECT_EQ(a2a_us(t, deepep), a2a_us(full, deepep));
  const Overrides across{{"moe.experts", "32"}, {"parallel.etp", "1"}, {"parallel.tp", "1"},
                         {"parallel.ep", "32"}, {"training.global_batch", "64"}, {"moe.dispatcher", "deepep"}};
  EXPECT_EQ(a2a_us(t, across), a2a_us(full, across));
}

}  // namespace
}  // namespace coconet::step

namespace coconet::step {
namespace {

// The 1F1B all-to-all overlap (moe.a2a_overlap): each half of a pass's
// all-to-all is exposed only beyond the other micro-batch's computation it
// is paired with, so the exposure falls, never below what the two passes'
// all-to-alls take beyond both passes' computation; on a slow network some
// stays exposed. GPipe, which pairs no forward with a backward, is refused.
TEST(StepMoePricing, TheOneF1BOverlapHidesTheAllToAllBehindTheOtherPass) {
  const Overrides base{{"moe.experts", "16"}, {"parallel.etp", "1"}, {"parallel.tp", "1"}, {"parallel.ep", "16"}};
  const auto pair = [&](const sim::Topology& t) {
    Overrides on = base, off = base;
    on.emplace_back("moe.a2a_overlap", "true");
    return std::make_pair(predict_step(parse_model(kMoe, "moe.yaml", off), t),
                          predict_step(parse_model(kMoe, "moe.yaml", on), t));
  };
  const auto exposed = [](const StepReport& r) { return r.moe_layer.fwd_a2a_us + r.moe_layer.bwd_a2a_us; };
  const auto compute = [](const StepReport& r) {
    return r.moe_layer.fwd_gemm_us + r.moe_layer.fwd_elementwise_us + r.moe_layer.bwd_gemm_us +
           r.moe_layer.bwd_elementwise_us;
  };
  for (const char* nic_Gbps : {"400", "4"}) {
    const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "2"}, {"network.nic_Gbps", nic_Gbps}});
    const auto [off, on] = pair(t);
    ASSERT_GT(exposed(off), 0) << nic_Gbps;
    EXPECT_LT(exposed(on), exposed(off)) << nic_Gbps;
    EXPECT_GE(exposed(on), std::max(0.0, exposed(off) - compute(off)) - 1e-9) << nic_Gbps;
    EXPECT_LT(on.step_us, off.step_us) << nic_Gbps;
    EXPECT_DOUBLE_EQ(compute(on), compute(off)) << nic_Gbps;
    testing::expect_step_is_its_laid_out_pipeline(on, "a2a overlap");
  }
  const sim::Topology slow = sim::load_topology("dgx-h100", {{"nodes", "2"}, {"network.nic_Gbps", "4"}});
  EXPECT_GT(exposed(pair(slow).second), 0);  // 100x slower NICs: more all-to-all than compute to hide it
  const std::string gpipe =
      error_of(std::string(kMoe) + "  pp: 2\n  schedule: gpipe\n", {{"moe.a2a_overlap", "true"}});
  EXPECT_TRUE(has(gpipe, "moe.a2a_overlap") && has(gpipe, "1F1B")) << gpipe;
}

// With the overlap, DeepEP's kernels hold Megatron-core's default 20 of the
// H100's 132 SMs while they run: the paired computation runs on the rest, so
// a hidden all-to-all still exposes that share of itself. On 400 Gb/s NICs
// every pair's computation outlasts its all-to-all (without the SMs' share
// nothing of the paired passes would stay exposed).
TEST(StepMoePricing, TheOverlapExposesTheSmsDeepEpHolds) {
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "2"}});
  const Overrides base{{"moe.experts", "16"},
                       {"parallel.etp", "1"},
                       {"parallel.tp", "1"},
                       {"parallel.ep", "16"},
                       {"training.global_batch", "512"},
                       {"moe.dispatcher", "deepep"}};
  Overrides on = base;
  on.emplace_back("moe.a2a_overlap", "true");
  const StepReport off_r = predict_step(parse_model(kMoe, "moe.yaml", base), t);
  const StepReport on_r = predict_step(parse_model(kMoe, "moe.yaml", on), t);
  const double off = off_r.moe_layer.fwd_a2a_us + off_r.moe_layer.bwd_a2a_us;
  const double exposed = on_r.moe_layer.fwd_a2a_us + on_r.moe_layer.bwd_a2a_us;
  const double m = double(on_r.layout.micro_batches);
  const double paired = 1 - 1 / m;  // one pipeline stage: the first forward and last backward alone
  constexpr double kDeepEpShare = 20.0 / 132;
  ASSERT_GT(off, 0);
  EXPECT_NEAR(exposed, off * (paired * kDeepEpShare + (1 - paired)), 1e-6 * off);
  EXPECT_LT(exposed, off);
}

// The warm-up forwards and cool-down backwards of the interleaved schedule
// run unpaired (Megatron-core: (v - 1) pp + 1 of the last stage's m v passes
// each way): with few micro-batches a larger share of the all-to-all stays
// exposed, at least that share.
TEST(StepMoePricing, TheOverlapLeavesTheWarmUpPassesExposed) {
  const sim::Topology t = sim::load_topology("dgx-h100", {{"nodes", "4"}});
  const auto share = [&](const char* global_batch) {
    const Overrides base{{"moe.experts", "16"},
                         {"parallel.etp", "1"},
                         {"parallel.tp", "1"},
                         {"parallel.ep", "16"},
                         {"parallel.pp", "2"},
                         {"parallel.schedule", "interleaved"},
                         {"parallel.virtual_stages", "2"},
                         {"training.global_batch", global_batch}};
    Overrides on = base;
    on.emplace_back("moe.a2a_overlap", "true");
    const StepReport off = predict_step(parse_model(kMoe, "moe.yaml", base), t);
    const StepReport r = predict_step(parse_model(kMoe, "moe.yaml", on), t);
    EXPECT_GT(off.moe_layer.fwd_a2a_us, 0) << global_batch;
    return std::make_pair(r.layout.micro_batches,
                          (r.moe_layer.fwd_a2a_us + r.moe_layer.bwd_a2a_us) /
                              (off.moe_layer.fwd_a2a_us + off.moe_layer.bwd_a2a_us));
  };
  const auto [few_m, few] = share("64");
  const auto [many_m, many] = share("1024");
  ASSERT_EQ(few_m, 4);    // 8 passes each way, 3 of them unpaired
  ASSERT_EQ(many_m, 64);  // 128 passes, 3 unpaired
  EXPECT_GE(few, 3.0 / 8 - 1e-9);
  EXPECT_GT(few, many);
}

}  // namespace
}  // namespace coconet::step
