// Today's dense models in `coconet step` (issue 29 items 1 and 7): the model
// keys (kv_heads, head_dim, ffn_type, norm, tied_embeddings) parse and each
// bad value names its file:line; parameter counts of Llama 3 8B, 70B and 405B
// against their published totals; the FLOP conventions (the model's, the
// hardware's, Megatron-LM eq. 3, NVIDIA dgxc's Llama formula against its
// published MFU); a TP group of one rank pays no collective; the memory a
// process cannot use; the search's reasons when nothing fits; the Llama layer
// programs chosen, bound and cached; Nemotron-4 (squared ReLU with LayerNorm):
// its family, parameters, FLOPs in NVIDIA's convention, memory and programs.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/catalog.h"
#include "model/error.h"
#include "model/parse.h"
#include "sim/topology.h"
#include "step/compose.h"
#include "step/flops.h"
#include "step/memory.h"
#include "step/search.h"
#include "step/spec.h"
#include "step_test_model.h"

namespace coconet::step {
namespace {

using testing::h100;
using testing::has;

// A small Llama-style model with every new key written (line numbers matter
// to the error tests: kv_heads is on line 6, ffn_type 8, norm 9, tied 10).
const char* const kLlama = R"(name: tiny-llama
model:
  layers: 4
  hidden: 1024
  heads: 16
  kv_heads: 4
  ffn: 2816
  ffn_type: swiglu
  norm: rmsnorm
  tied_embeddings: false
  head_dim: 64
  sequence: 2048
  vocabulary: 32000
training:
  micro_batch: 1
  global_batch: 32
parallel:
  tp: 2
)";

std::string error_of(const std::string& yaml, const Overrides& o = {}, int nodes = 1) {
  try {
    (void)predict_step(parse_model(yaml, "tiny.yaml", o), h100(nodes));
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// ---- the keys -----------------------------------------------------------------------

TEST(StepModelKeys, EveryKeyParses) {
  const Transformer m = parse_model(kLlama, "tiny.yaml").model;
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.ffn_type, FfnType::swiglu);
  EXPECT_EQ(m.norm, Norm::rmsnorm);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.family(), Family::llama);
  // A head_dim of its own: the attention 16 x 128 = 2048 wide on a hidden of 1024.
  const Transformer wide = parse_model(kLlama, "tiny.yaml", {{"model.head_dim", "128"}}).model;
  EXPECT_EQ(wide.attention_width(), 2048);
  EXPECT_GT(layer_parameters(wide), layer_parameters(m));
}

TEST(StepModelKeys, DefaultsAreGpts) {
  const Transformer m = load_model("gpt3-175b").model;
  EXPECT_EQ(m.kv_heads, m.heads);
  EXPECT_EQ(m.head_dim, m.hidden / m.heads);
  EXPECT_EQ(m.ffn_type, FfnType::gelu);
  EXPECT_EQ(m.norm, Norm::layernorm);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_EQ(m.family(), Family::gpt);
}

TEST(StepModelKeys, EachBadValueNamesItsLine) {
  const std::string kv = error_of(kLlama, {{"model.kv_heads", "5"}});
  EXPECT_TRUE(has(kv, "tiny.yaml:6:")) << kv;
  EXPECT_TRUE(has(kv, "does not divide model.heads = 16")) << kv;
  const std::string ffn = error_of(kLlama, {{"model.ffn_type", "relu"}});
  EXPECT_TRUE(has(ffn, "tiny.yaml:8:")) << ffn;
  EXPECT_TRUE(has(ffn, "not one of gelu, swiglu, squared_relu")) << ffn;
  const std::string norm = error_of(kLlama, {{"model.norm", "batchnorm"}});
  EXPECT_TRUE(has(norm, "tiny.yaml:9:")) << norm;
  EXPECT_TRUE(has(norm, "not one of layernorm, rmsnorm")) << norm;
  const std::string tied = error_of(kLlama, {{"model.tied_embeddings", "sometimes"}});
  EXPECT_TRUE(has(tied, "tiny.yaml:10:")) << tied;
  EXPECT_TRUE(has(tied, "tied_embeddings")) << tied;
  const std::string dim = error_of(kLlama, {{"model.head_dim", "0"}});
  EXPECT_TRUE(has(dim, "tiny.yaml:11:")) << dim;
  EXPECT_TRUE(has(dim, "model.head_dim must be a whole number")) << dim;
  // A pair without layer programs, named at the norm.
  const std::string pair = error_of(kLlama, {{"model.norm", "layernorm"}});
  EXPECT_TRUE(has(pair, "tiny.yaml:9:")) << pair;
  EXPECT_TRUE(has(pair, "has no layer programs")) << pair;
  // The message names every pair that has programs.
  for (const char* p : {"gelu with layernorm (workloads/megatron_layer_*)", "swiglu with rmsnorm (workloads/llama_layer_*)",
                        "squared_relu with layernorm (workloads/nemotron_layer_*)"})
    EXPECT_TRUE(has(pair, p)) << pair;
  // Squared ReLU has programs with LayerNorm only; GELU with RMSNorm has none.
  const std::string relu_rms = error_of(kLlama, {{"model.ffn_type", "squared_relu"}});
  EXPECT_TRUE(has(relu_rms, "tiny.yaml:9:")) << relu_rms;
  EXPECT_TRUE(has(relu_rms, "model.ffn_type squared_relu with model.norm rmsnorm has no layer programs")) << relu_rms;
  const std::string gelu_rms = error_of(kLlama, {{"model.ffn_type", "gelu"}});
  EXPECT_TRUE(has(gelu_rms, "tiny.yaml:9:")) << gelu_rms;
  EXPECT_TRUE(has(gelu_rms, "has no layer programs")) << gelu_rms;
  // The GPT programs express neither GQA nor an attention wider than the hidden size.
  const std::string gqa =
      error_of(kLlama, {{"model.norm", "layernorm"}, {"model.ffn_type", "gelu"}});
  EXPECT_TRUE(has(gqa, "tiny.yaml:6:")) << gqa;
  EXPECT_TRUE(has(gqa, "grouped-query attention")) << gqa;
  const std::string width = error_of(kLlama, {{"model.norm", "layernorm"},
                                              {"model.ffn_type", "gelu"},
                                              {"model.kv_heads", "16"},
                                              {"model.head_dim", "128"}});
  EXPECT_TRUE(has(width, "tiny.yaml:11:")) << width;
  EXPECT_TRUE(has(width, "is not model.hidden")) << width;
  // Megatron-LM's rule: tp divides the K/V heads (4 here), named at the parallel section.
  const std::string tp = error_of(kLlama, {{"parallel.tp", "8"}});
  EXPECT_TRUE(has(tp, "tiny.yaml:18:")) << tp;
  EXPECT_TRUE(has(tp, "does not divide model.kv_heads = 4")) << tp;
  EXPECT_EQ(error_of(kLlama, {{"parallel.tp", "4"}}), "");
}

// Squared ReLU with LayerNorm is the Nemotron family: GQA and a head_dim of
// its own are accepted (its programs take them), no biases, rotary positions.
TEST(StepModelKeys, SquaredReluWithLayerNormIsNemotron) {
  const Overrides nemotron{{"model.ffn_type", "squared_relu"}, {"model.norm", "layernorm"}};
  const ModelSpec s = parse_model(kLlama, "tiny.yaml", nemotron);
  EXPECT_EQ(s.model.ffn_type, FfnType::squared_relu);
  EXPECT_EQ(s.model.family(), Family::nemotron);
  EXPECT_EQ(to_string(s.model.ffn_type), "squared_relu");
  EXPECT_EQ(to_string(s.model.family()), "nemotron");
  EXPECT_EQ(s.model.ffn_matrices(), 2);
  EXPECT_FALSE(s.model.traits().biases);
  EXPECT_FALSE(s.model.traits().dropout);
  EXPECT_FALSE(s.model.traits().learned_positions);
  EXPECT_EQ(error_of(kLlama, nemotron), "");
  const ModelSpec n = load_model("nemotron4-340b");
  EXPECT_EQ(n.model.family(), Family::nemotron);
  EXPECT_EQ(n.model.head_dim, 192);
  EXPECT_EQ(n.model.kv_heads, 8);
}

// ---- parameters -----------------------------------------------------------------------

// Published totals: Llama Team, "The Llama 3 Herd of Models" (arXiv:2407.21783),
// Table 3's sizes 8B, 70B and 405B; the model cards' 8.03B, 70.6B, 405B.
TEST(StepParameters, Llama3MatchesThePublishedTotals) {
  const std::pair<const char*, double> published[] = {
      {"llama3.1-8b", 8.03e9}, {"llama3-70b", 70.6e9}, {"llama3-405b", 405e9}};
  for (const auto& [name, total] : published) {
    const ModelSpec s = load_model(name);
    EXPECT_EQ(s.model.family(), Family::llama) << name;
    EXPECT_FALSE(s.model.tied_embeddings) << name;
    EXPECT_NEAR(parameters(s.model) / total, 1.0, 0.01)
        << name << ": " << parameters(s.model) / 1e9 << "B";
  }
  // By hand for 70B: layers 80 x (QKV 8192 x (64 + 16) x 128 + projection 8192^2 + 3 x 8192 x 28672
  // + 2 x 8192 RMSNorm) + 2 x 128256 x 8192 untied + 8192 final norm.
  const double layer = 8192.0 * 80 * 128 + 8192.0 * 8192 + 3.0 * 8192 * 28672 + 2 * 8192;
  EXPECT_DOUBLE_EQ(parameters(load_model("llama3-70b").model),
                   80 * layer + 2.0 * 128256 * 8192 + 8192);
}

// Nemotron-4 340B: 340 billion parameters (NVIDIA, arXiv:2406.11704; the
// model card huggingface.co/nvidia/Nemotron-4-340B-Base). By hand: 96 layers
// of QKV 18432 x (96 + 16) x 192, projection 18432^2, two MLP matrices
// 18432 x 73728, two LayerNorms (weight and bias); no biases, no position
// embeddings (rotary); untied input and output embeddings; the final LayerNorm.
TEST(StepParameters, Nemotron4MatchesThePublishedTotal) {
  const ModelSpec s = load_model("nemotron4-340b");
  EXPECT_NEAR(parameters(s.model) / 340e9, 1.0, 0.02) << parameters(s.model) / 1e9 << "B";
  const double h = 18432, layer = h * (96 + 16) * 192 + h * h + 2 * h * 73728 + 2 * 2 * h;
  EXPECT_DOUBLE_EQ(layer_parameters(s.model), layer);
  EXPECT_DOUBLE_EQ(parameters(s.model), 96 * layer + 2 * 256000 * h + 2 * h);
}

TEST(StepParameters, UntiedEmbeddingsAddTheOutputLayer) {
  const ModelSpec untied = parse_model(kLlama, "t");
  const ModelSpec tied = parse_model(kLlama, "t", {{"model.tied_embeddings", "true"}});
  EXPECT_DOUBLE_EQ(parameters(untied.model) - parameters(tied.model), 32000.0 * 1024);
  // On one stage both matrices are held; over a pipeline each end holds one either way.
  const sim::Topology t = h100(1);
  const Layout one = resolve_layout(untied, t);
  EXPECT_NEAR(stage_parameters(untied, one) - stage_parameters(tied, one), 32000.0 * 1024 / 2,
              1e-3);
  const ModelSpec piped = parse_model(kLlama, "t", {{"parallel.pp", "2"}});
  const ModelSpec piped_tied =
      parse_model(kLlama, "t", {{"parallel.pp", "2"}, {"model.tied_embeddings", "true"}});
  EXPECT_DOUBLE_EQ(stage_parameters(piped, resolve_layout(piped, t)),
                   stage_parameters(piped_tied, resolve_layout(piped_tied, t)));
}

// ---- FLOPs ------------------------------------------------------------------------------

// NVIDIA dgxc-benchmarking's formula, copied with its rows into
// validation/reference/dgxc-llama31-h100.yaml: it gives the MFU the README
// publishes for each BF16 Llama 3.1 row within 1%.
TEST(StepFlops, DgxcFormulaGivesThePublishedMfu) {
  const std::string path = model::data_root() + "/validation/reference/dgxc-llama31-h100.yaml";
  const YAML::Node root = YAML::LoadFile(path);
  const double peak = root["peak_bf16_tflops"].as<double>(), s = root["sequence"].as<double>(),
               V = root["vocabulary"].as<double>();
  ASSERT_GE(root["flop_checks"].size(), 5u);
  for (const auto& r : root["flop_checks"]) {
    const double per_seq = dgxc_llama_flops_per_sequence(
        s, r["layers"].as<double>(), r["hidden"].as<double>(), r["heads"].as<double>(),
        r["kv_heads"].as<double>(), r["ffn"].as<double>(), V);
    const double mfu = r["global_batch"].as<double>() * per_seq / r["step_s"].as<double>() /
                       r["gpus"].as<double>() / (peak * 1e12);
    EXPECT_NEAR(mfu / r["mfu"].as<double>(), 1.0, 0.01)
        << r["model"].as<std::string>() << " on " << r["gpus"].as<int>() << " GPUs";
  }
}

// The model's count is dgxc's for a Llama (no recomputation, non-causal) and
// Megatron-LM's 72 B s l h^2 (1 + s/6h + V/12lh) for a GPT.
TEST(StepFlops, ModelFlopsFollowEveryKey) {
  for (const char* name : {"llama3.1-8b", "llama3-70b", "llama3-405b"}) {
    const ModelSpec x = load_model(name);
    const auto& m = x.model;
    const double dgxc = double(x.training.global_batch) *
                        dgxc_llama_flops_per_sequence(
                            double(m.sequence), double(m.layers), double(m.hidden), double(m.heads),
                            double(m.kv_heads), double(m.ffn), double(m.vocabulary));
    EXPECT_NEAR(model_flops(x) / dgxc, 1.0, 1e-12) << name;
  }
  const ModelSpec g = load_model("gpt3-175b");
  const double B = double(g.training.global_batch), sq = 2048, l = 96, h = 12288, V = 51200;
  EXPECT_NEAR(model_flops(g) / (72 * B * sq * l * h * h * (1 + sq / (6 * h) + V / (12 * l * h))),
              1.0, 1e-12);
  EXPECT_NEAR(
      megatron_eq3_flops(g) / (96 * B * sq * l * h * h * (1 + sq / (6 * h) + V / (16 * l * h))),
      1.0, 1e-12);
  // GQA, SwiGLU and head_dim each move the count the way their GEMMs do.
  const ModelSpec base = parse_model(kLlama, "t");
  const ModelSpec mha = parse_model(kLlama, "t", {{"model.kv_heads", "16"}});
  const double tokens = 32.0 * 2048, h1 = 1024, kv_cols = 2 * (16 - 4) * 64;
  EXPECT_NEAR(model_flops(mha) - model_flops(base), tokens * 3 * 2 * 4 * h1 * kv_cols,
              1e-3 * model_flops(base));
}

// NVIDIA dgxc-benchmarking's GPT-3/Nemotron formula gives the MFU its
// README publishes for every Nemotron-4 340B row (BF16 against 989, FP8
// against 1979 TFLOP/s) within 1% (validation/reference/dgxc-h100.yaml).
TEST(StepFlops, DgxcGptFormulaGivesThePublishedNemotronMfu) {
  const YAML::Node ref = YAML::LoadFile(model::data_root() + "/validation/reference/dgxc-h100.yaml");
  int rows = 0;
  for (const char* list : {"held", "outside_tolerance"})
    for (const auto& r : ref[list]) {
      if (r[0].as<std::string>() != "nemotron4-340b") continue;
      ++rows;
      const double gpus = r[2].as<double>(), gbs = r[8].as<double>(), step_s = r[9].as<double>();
      const double peak = ref["peak_tflops"][r[1].as<std::string>()].as<double>();
      const double mfu = gbs * dgxc_gpt_flops_per_sequence(4096, 96, 18432, 256000) / step_s / gpus / (peak * 1e12);
      EXPECT_NEAR(mfu / r[10].as<double>(), 1.0, 0.01) << r[1].as<std::string>() << " on " << gpus << " GPUs";
    }
  EXPECT_EQ(rows, 10);
}

// The formula assumes multi-head attention: coconet's count of Nemotron-4
// 340B with its K/V heads widened to the query heads (kv_heads 96) is the
// formula's (its MLP is 4h of two matrices, as the formula assumes); with its
// 8 K/V heads, the model's own count is lower by exactly the K/V columns the
// formula adds (2 x 88 x 192 of every layer's QKV GEMM): 14.6% of the formula's count.
TEST(StepFlops, NemotronModelFlopsAreDgxcsWithKvCountedAsQueries) {
  const ModelSpec gqa = load_model("nemotron4-340b");
  const ModelSpec mha = load_model("nemotron4-340b", {{"model.kv_heads", "96"}});
  const double B = double(gqa.training.global_batch);
  const double dgxc = B * dgxc_gpt_flops_per_sequence(4096, 96, 18432, 256000);
  EXPECT_NEAR(model_flops(mha) / dgxc, 1.0, 0.02);
  EXPECT_NEAR(model_flops(mha) / dgxc, 1.0, 1e-12);  // in fact exactly
  const double kv_columns = 2.0 * (96 - 8) * 192;
  EXPECT_NEAR(model_flops(mha) - model_flops(gqa), B * 4096 * 3 * 2 * 96 * 18432 * kv_columns,
              1e-9 * model_flops(gqa));
  EXPECT_NEAR(1 - model_flops(gqa) / model_flops(mha), 0.146, 0.001);
}

TEST(StepFlops, HardwareFlopsCountTheRecomputationTheLayoutRuns) {
  const ModelSpec none = parse_model(kLlama, "t");
  const ModelSpec sel = parse_model(kLlama, "t", {{"parallel.recompute", "selective"}});
  const ModelSpec full = parse_model(kLlama, "t", {{"parallel.recompute", "full"}});
  EXPECT_DOUBLE_EQ(hardware_flops(none), model_flops(none));
  const double tokens = 32.0 * 2048, layers = 4;
  EXPECT_NEAR(hardware_flops(sel) - model_flops(sel), tokens * layers * 4 * 2048 * 16 * 64, 1.0);
  EXPECT_NEAR(hardware_flops(full) - model_flops(full),
              tokens * layers * layer_forward_flops_per_token(full.model), 1.0);
  // The step prints each count over its time on its 8 GPUs; MFU is the
  // model's over the dtype's published peak (H100 SXM dense bf16: 989
  // TFLOP/s, NVIDIA's datasheet), each from the counts computed here.
  const StepReport r = predict_step(full, h100(1));
  constexpr double kH100Bf16Tflops = 989, kGpus = 8;
  const double per_gpu_s = r.step_us * 1e-6 * kGpus * 1e12;
  EXPECT_NEAR(r.model_tflops_per_gpu, model_flops(full) / per_gpu_s, 1e-9 * r.model_tflops_per_gpu);
  EXPECT_NEAR(r.hardware_tflops_per_gpu, hardware_flops(full) / per_gpu_s, 1e-9 * r.hardware_tflops_per_gpu);
  EXPECT_NEAR(r.eq3_tflops_per_gpu, megatron_eq3_flops(full) / per_gpu_s, 1e-9 * r.eq3_tflops_per_gpu);
  EXPECT_GT(r.hardware_tflops_per_gpu, r.model_tflops_per_gpu);
  EXPECT_NEAR(r.mfu, model_flops(full) / per_gpu_s / kH100Bf16Tflops, 1e-12);
}

// ---- a TP group of one rank -----------------------------------------------------------------

// Megatron-LM at tp 1 runs no TP collective; the simulator prices a one-rank
// collective as a local copy (what the executor does), which charged
// megatron-1.7b on 4 DGX A100 nodes ~25 ms of "TP communication" a step.
TEST(StepOneRank, ATpGroupOfOneRankPaysNoCollective) {
  const StepReport r =
      predict_step(load_model("megatron-1.7b"), sim::load_topology("dgx-a100", {{"nodes", "4"}}));
  ASSERT_EQ(r.layout.tp, 1);
  EXPECT_EQ(r.layer.fwd_tp_us, 0);
  EXPECT_EQ(r.layer.bwd_tp_us, 0);
  EXPECT_EQ(r.breakdown.tp_comm_us, 0);
  EXPECT_GT(r.layer.fwd_gemm_us, 0);
  // At tp 2 the collectives are there.
  const StepReport two =
      predict_step(load_model("megatron-1.7b", {{"parallel.tp", "2"}, {"parallel.dp", "16"}}),
                   sim::load_topology("dgx-a100", {{"nodes", "4"}}));
  EXPECT_GT(two.breakdown.tp_comm_us, 0);
}

// ---- memory
// ----------------------------------------------------------------------------------------

TEST(StepMemory, ReservedMemoryIsSubtractedBeforeALayoutFits) {
  const ModelSpec s = load_model("llama3-70b");
  const StepReport r = predict_step(s, h100(32));
  EXPECT_DOUBLE_EQ(r.memory.reserved_GB, kDefaultReservedGB);
  EXPECT_TRUE(r.memory.fits()) << r.memory.total_GB();
  // Just above the HBM it needs less the reserve: fits with no reserve, not with the default.
  const std::string cap = std::to_string(r.memory.total_GB() + 1.0);
  const sim::Topology tight =
      sim::load_topology("dgx-h100", {{"nodes", "32"}, {"gpu.memory_GB", cap}});
  const StepReport reserved = predict_step(s, tight);
  EXPECT_FALSE(reserved.memory.fits());
  sim::Topology bare = tight;  // a topology that states gpu.reserved_GB: 0
  bare.gpu.reserved_GB = 0.0;
  const StepReport none = predict_step(s, bare);
  EXPECT_TRUE(none.memory.fits());
  EXPECT_DOUBLE_EQ(none.memory.reserved_GB, 0);
}

TEST(StepPrecision, MainGradientsAndTheirReductionFollowMegatronsDefaults) {
  // bf16: fp32 main gradients reduced in fp32; f16: the values' dtype.
  const ModelSpec b = parse_model(kLlama, "t");
  EXPECT_EQ(b.training.grad_dtype, model::DType::f32);
  EXPECT_EQ(b.training.grad_reduce_dtype, model::DType::f32);
  const ModelSpec f = parse_model(kLlama, "t", {{"training.dtype", "f16"}});
  EXPECT_EQ(f.training.grad_dtype, model::DType::f16);
  EXPECT_EQ(f.training.grad_reduce_dtype, model::DType::f16);
  // Reducing in bf16 halves the reduction's bytes, not the buffer's memory.
  const sim::Topology t = h100(4);
  const Overrides dp{{"parallel.dp", "16"}, {"parallel.dp_overlap", "false"}};
  Overrides half = dp;
  half.emplace_back("training.grad_reduce_dtype", "bf16");
  const StepReport f32 = predict_step(parse_model(kLlama, "t", dp), t);
  const StepReport b16 = predict_step(parse_model(kLlama, "t", half), t);
  EXPECT_LT(b16.breakdown.dp_comm_us, f32.breakdown.dp_comm_us);
  EXPECT_DOUBLE_EQ(b16.memory.gradients_GB, f32.memory.gradients_GB);
  EXPECT_TRUE(has(error_of(kLlama, {{"training.grad_reduce_dtype", "f8"}}), "tiny.yaml:")) << error_of(kLlama, {{"training.grad_reduce_dtype", "f8"}});
}

TEST(StepPrecision, Fp8AllReducesItsAmaxesAtTheEndOfEachChunksForward) {
  const sim::Topology t = h100(4);
  const Overrides dp{{"parallel.dp", "16"}};
  Overrides fp8 = dp;
  fp8.emplace_back("training.dtype", "fp8");
  const StepReport b = predict_step(parse_model(kLlama, "t", dp), t);
  const StepReport f = predict_step(parse_model(kLlama, "t", fp8), t);
  for (const ChunkTimes& c : b.chunks) EXPECT_EQ(c.fwd_amax_us, 0.0);
  for (const ChunkTimes& c : f.chunks) {
    EXPECT_GT(c.fwd_amax_us, 0.0);
    EXPECT_LT(c.fwd_amax_us, c.fwd_compute_us);  // a few hundred bytes: latency, not bandwidth
  }
  // In the TP line of the breakdown, every micro-batch's.
  const double amax = f.chunks.front().fwd_amax_us * double(f.layout.micro_batches);
  EXPECT_GE(f.breakdown.tp_comm_us, amax);
}

TEST(StepMemory, ActivationsFollowGqaAndSwiglu) {
  const sim::Topology t = h100(1);
  auto acts = [&](const Overrides& o) {
    const ModelSpec s = parse_model(kLlama, "t", o);
    return layer_activation_bytes(s, resolve_layout(s, t), AttentionMemory::scores);
  };
  const double base = acts({});
  // 12 more K/V heads of 64 on 2048 tokens, 2 bytes each for K and V, over tp 2.
  EXPECT_NEAR(acts({{"model.kv_heads", "16"}}) - base, 2.0 * 2 * 2048 * 12 * 64 / 2, 1e-6);
  // A wider MLP: SwiGLU keeps 3 tensors f wide, 2 bytes each, over tp 2.
  EXPECT_NEAR(acts({{"model.ffn", "3072"}}) - base, 3.0 * 2 * 2048 * 256 / 2, 1e-6);
  // GPT's count is still Korthikanti's Table 2: sbh (10 + 24/t + 5as/(ht)).
  const ModelSpec g = load_model(
      "gpt3-175b", {{"parallel.sequence_parallel", "false"}, {"parallel.recompute", "none"}});
  const Layout gl = resolve_layout(g, h100(128));
  const double sbh = 2048.0 * 12288, tt = gl.tp;
  EXPECT_NEAR(layer_activation_bytes(g, gl, AttentionMemory::scores) /
                  (sbh * (10 + 24 / tt + 5 * 96 * 2048 / (12288 * tt))),
              1.0, 1e-12);
  // Flash attention keeps no scores, but 4 bytes (fp32 log-sum-exp) per query and head, over tp.
  EXPECT_NEAR(layer_activation_bytes(g, gl, AttentionMemory::scores) - layer_activation_bytes(g, gl, AttentionMemory::flash),
              (5.0 * 96 * 2048 * 2048 - 4.0 * 96 * 2048) / tt, 1e-3);
}

// Nemotron's layer keeps squared ReLU's two f-wide tensors (relu(u) and its
// square, as GELU's input and output) and no dropout mask or dropout scores.
TEST(StepMemory, SquaredReluKeepsTwoTensorsAndNoDropout) {
  const sim::Topology t = h100(1);
  const Overrides nemotron{{"model.ffn_type", "squared_relu"}, {"model.norm", "layernorm"}};
  auto acts = [&](Overrides o) {
    o.insert(o.end(), nemotron.begin(), nemotron.end());
    const ModelSpec s = parse_model(kLlama, "t", o);
    return layer_activation_bytes(s, resolve_layout(s, t), AttentionMemory::scores);
  };
  const double base = acts({});
  EXPECT_NEAR(acts({{"model.ffn", "3072"}}) - base, 2.0 * 2 * 2048 * 256 / 2, 1e-6);
  // By hand (tp 2, no sequence parallelism): 4 sbh replicated 2-byte tensors;
  // Q, K, V, the projection's input, the MLP's 2 tensors and the 2-byte scores over tp.
  const double sb = 2048, h = 1024, t2 = 2, ad = 16 * 64, kvd = 4 * 64, f = 2816;
  const double by_hand = sb * h * 4 * 2 + (2 * sb * (ad + 2 * kvd) + 2 * sb * ad + 2 * 2 * sb * f +
                                           2 * 16 * 2048.0 * 2048) / t2;
  EXPECT_NEAR(base, by_hand, 1e-6);
}

TEST(StepMemory, TheStepSizesTheAttentionTheTunerChose) {
  // Llama 3 405B as Meta ran it (no recomputation, flash attention): the
  // scores would take 2 a s^2 / t = 2 GB a layer a micro-batch; flash
  // attention keeps none, and the report sizes what the tuner chose.
  const ModelSpec s = load_model("llama3-405b", {{"parallel.recompute", "none"}});
  const sim::Topology t = h100(1024);
  const StepReport r = predict_step(s, t);
  const Layout l = resolve_layout(s, t);
  EXPECT_DOUBLE_EQ(r.memory.total_GB(), memory_per_gpu(s, l, t, AttentionMemory::flash).total_GB());
  EXPECT_GT(memory_per_gpu(s, l, t, AttentionMemory::scores).activations_GB - r.memory.activations_GB, 10.0);
  // With the attention materialised the scores are kept.
  const ModelSpec m = load_model("llama3-405b", {{"parallel.recompute", "none"}, {"training.attention", "materialised"}});
  EXPECT_DOUBLE_EQ(predict_step(m, t).memory.total_GB(), memory_per_gpu(m, l, t, AttentionMemory::scores).total_GB());
}

// ---- the search's reasons
// ----------------------------------------------------------------------------

TEST(StepSearch, WhenNothingFitsTheSearchSaysWhy) {
  // A batch that no micro-batch x dp divides: every layout ruled out by divisibility.
  // (2 layers: pp at most 2; tp at most 4, the K/V heads; no context
  // parallelism: dp at least 2 of 16 GPUs.)
  const ModelSpec odd =
      parse_model(kLlama, "t", {{"training.global_batch", "3"}, {"model.layers", "2"}});
  SearchOptions no_cp;
  no_cp.vary_cp = false;
  const SearchResult r = search_layouts(odd, h100(2), no_cp);
  EXPECT_TRUE(r.best.empty());
  EXPECT_EQ(r.evaluated, 0);
  EXPECT_GT(r.indivisible, 0);
  const std::string why = why_none_fits(r, h100(2));
  EXPECT_TRUE(has(why, "ruled out by divisibility")) << why;
  EXPECT_TRUE(has(why, "training.global_batch = 3")) << why;
  // HBM no larger than the reserve: the memory is named.
  const sim::Topology tiny =
      sim::load_topology("dgx-h100", {{"nodes", "1"}, {"gpu.memory_GB", "3"}});
  const SearchResult m = search_layouts(parse_model(kLlama, "t"), tiny);
  EXPECT_TRUE(m.best.empty());
  EXPECT_EQ(m.over_memory, m.evaluated);
  EXPECT_GT(m.evaluated, 0);
  const std::string mem = why_none_fits(m, tiny);
  EXPECT_TRUE(has(mem, "usable per GPU")) << mem;
  EXPECT_TRUE(has(mem, "reserved")) << mem;
}

// ---- the Llama layer programs
// ----------------------------------------------------------------------------

TEST(StepLayerBlock, TheFamilyChoosesTheProgramsAndTheShapeBindsThem) {
  LayerShape x{.micro_batch = 1,
               .sequence = 8192,
               .heads = 64,
               .head_dim = 128,
               .ffn = 28672,
               .tp = 8,
               .family = Family::llama,
               .hidden = 8192,
               .kv_heads = 8};
  EXPECT_EQ(layer_programs(x).first, "llama_layer_fwd");
  x.sequence_parallel = true;
  EXPECT_EQ(layer_programs(x).second, "llama_layer_sp_bwd");
  const model::Bindings b = layer_bindings(x);
  EXPECT_EQ(b.at("KV"), 8);
  EXPECT_EQ(b.at("G"), 8);
  EXPECT_EQ(b.at("GQ"), 10);  // (64 + 2 x 8) x 128 QKV columns = GQ x KV x D
  EXPECT_EQ(b.at("H"), 8192);
  // Every size binds the program (no unknown name), and its QKV weight has (NH + 2 KV) D columns.
  const model::Program p = model::load_program(model::resolve_workload("llama_layer_fwd"));
  const model::Bindings bound = p.bind(b);
  for (const auto& in : p.inputs) {
    if (in.name == "wqkv") {
      EXPECT_EQ(model::eval_shape(in.type.shape, bound)[1], (64 + 2 * 8) * 128);
    }
  }
  x.family = Family::gpt;
  EXPECT_EQ(layer_programs(x).first, "megatron_layer_sp_fwd");
  EXPECT_EQ(layer_bindings(x).count("KV"), 0u);
}

TEST(StepLayerBlock, NemotronChoosesItsProgramsWithLlamasBindings) {
  LayerShape x{.micro_batch = 1,
               .sequence = 4096,
               .heads = 96,
               .head_dim = 192,
               .ffn = 73728,
               .tp = 8,
               .family = Family::nemotron,
               .hidden = 18432,
               .kv_heads = 8};
  EXPECT_EQ(layer_programs(x).first, "nemotron_layer_fwd");
  EXPECT_EQ(layer_programs(x).second, "nemotron_layer_bwd");
  x.sequence_parallel = true;
  EXPECT_EQ(layer_programs(x).first, "nemotron_layer_sp_fwd");
  const model::Bindings b = layer_bindings(x);
  EXPECT_EQ(b.at("G"), 12);
  EXPECT_EQ(b.at("GQ"), 14);  // (96 + 2 x 8) x 192 QKV columns = GQ x KV x D
  for (const char* w : {"nemotron_layer_fwd", "nemotron_layer_bwd", "nemotron_layer_sp_fwd", "nemotron_layer_sp_bwd"}) {
    const model::Program p = model::load_program(model::resolve_workload(w));
    EXPECT_NO_THROW((void)p.bind(b)) << w;
  }
  // A step of Nemotron-4 340B prices its programs with fused kernels and flash attention.
  const ModelSpec s = load_model("nemotron4-340b");
  const sim::Topology t = h100(16);
  const StepReport r = predict_step(s, t);
  EXPECT_GT(r.layer.fwd_gemm_us, 0);
  // Memory as modelled: over the 82.5 GB usable on 128 GPUs (dp 2: 34.6 GB of
  // Adam state), within it from 256 (docs/step.md says what that leaves out).
  EXPECT_FALSE(r.memory.fits());
  const ModelSpec wider = load_model("nemotron4-340b", {{"training.global_batch", "64"}});
  EXPECT_TRUE(memory_per_gpu(wider, resolve_layout(wider, h100(32)), h100(32)).fits());
  LayerBlockPricer pricer(t);
  const LayerShape xs = step_layer_shape(s, resolve_layout(s, t));
  const KernelChoices k = kernel_choices_of(pricer.price(xs), xs);
  EXPECT_TRUE(k.fused_kernels_fwd);
  EXPECT_TRUE(k.fused_kernels_bwd);
  EXPECT_TRUE(k.flash_attention_fwd);
  EXPECT_TRUE(k.flash_attention_bwd);
}

TEST(StepLayerBlock, LlamaLayersAreTunedAndCachedPerShape) {
  const sim::Topology t = h100(1);
  LayerBlockPricer pricer(t);
  LayerShape x{.micro_batch = 1,
               .sequence = 4096,
               .heads = 32,
               .head_dim = 128,
               .ffn = 14336,
               .tp = 4,
               .family = Family::llama,
               .hidden = 4096,
               .kv_heads = 8};
  const LayerBlock gqa = pricer.price(x);
  EXPECT_GT(gqa.fwd.gemm_us, 0);
  EXPECT_GT(gqa.fwd.tp_us(), 0) << gqa.fwd.schedule;
  EXPECT_GT(gqa.bwd.gemm_us, gqa.fwd.gemm_us);
  x.kv_heads = 32;  // multi-head: a wider QKV GEMM, a distinct cache entry
  const LayerBlock mha = pricer.price(x);
  EXPECT_EQ(pricer.tuned(), 2);
  EXPECT_GT(mha.fwd.gemm_us, gqa.fwd.gemm_us);
  (void)pricer.price(x);
  EXPECT_EQ(pricer.tuned(), 2);
  // The step of a Llama model prices its programs.
  const StepReport r = predict_step(parse_model(kLlama, "t"), t);
  EXPECT_GT(r.layer.fwd_gemm_us, 0);
  EXPECT_GT(r.model_tflops_per_gpu, 0);
}


// ---- multi-head latent attention (DeepSeek-V3) -----------------------------------------

// A small MLA model (line numbers matter: attention on line 6, q_lora_rank 7,
// kv_lora_rank 8, qk_rope_head_dim 9, qk_nope_head_dim 10, v_head_dim 11).
const char* const kMla = R"(name: tiny-mla
model:
  layers: 4
  hidden: 1024
  heads: 16
  attention: mla
  q_lora_rank: 384
  kv_lora_rank: 128
  qk_rope_head_dim: 32
  qk_nope_head_dim: 64
  v_head_dim: 64
  ffn: 2816
  ffn_type: swiglu
  norm: rmsnorm
  sequence: 2048
  vocabulary: 32000
training:
  micro_batch: 1
  global_batch: 32
parallel:
  tp: 2
)";

TEST(StepModelKeys, MlaKeysParse) {
  const Transformer m = parse_model(kMla, "tiny.yaml").model;
  EXPECT_EQ(m.attention, AttentionKind::mla);
  EXPECT_EQ(m.family(), Family::mla);
  EXPECT_EQ(m.mla.q_lora_rank, 384);
  EXPECT_EQ(m.mla.kv_lora_rank, 128);
  EXPECT_EQ(m.head_dim, 96);  // nope + rope: a query's and a key's
  EXPECT_EQ(m.v_head_dim(), 64);
  EXPECT_EQ(m.kv_heads, 16);  // one K and V per head
  EXPECT_EQ(m.context_width(), 16 * 64);
  EXPECT_EQ(m.qkv_width(), 16 * (2 * 96 + 64));
  // The default is multi-head attention, whose value heads are head_dim wide.
  const Transformer llama = parse_model(kLlama, "tiny.yaml").model;
  EXPECT_EQ(llama.attention, AttentionKind::mha);
  EXPECT_EQ(llama.v_head_dim(), llama.head_dim);
  EXPECT_EQ(llama.qkv_width(), llama.attention_width() + 2 * llama.kv_width());
  EXPECT_EQ(error_of(kMla), "");
}

TEST(StepModelKeys, EachBadMlaValueNamesItsLine) {
  const std::string kind = error_of(kMla, {{"model.attention", "sparse"}});
  EXPECT_TRUE(has(kind, "tiny.yaml:6:")) << kind;
  EXPECT_TRUE(has(kind, "not one of mha, mla")) << kind;
  const std::string rank = error_of(kMla, {{"model.q_lora_rank", "0"}});
  EXPECT_TRUE(has(rank, "tiny.yaml:7:")) << rank;
  EXPECT_TRUE(has(rank, "model.q_lora_rank must be a whole number")) << rank;
  const std::string v = error_of(kMla, {{"model.v_head_dim", "-4"}});
  EXPECT_TRUE(has(v, "tiny.yaml:11:")) << v;
  // Every size is required with attention mla.
  std::string without(kMla);
  without.erase(without.find("  kv_lora_rank: 128\n"), std::string("  kv_lora_rank: 128\n").size());
  const std::string missing = error_of(without);
  EXPECT_TRUE(has(missing, "tiny.yaml:")) << missing;
  EXPECT_TRUE(has(missing, "model needs the key 'kv_lora_rank'")) << missing;
  // MLA's sizes without attention mla, head_dim or kv_heads with it.
  const std::string stray = error_of(kMla, {{"model.attention", "mha"}});
  EXPECT_TRUE(has(stray, "tiny.yaml:7:")) << stray;
  EXPECT_TRUE(has(stray, "needs model.attention: mla")) << stray;
  const std::string dim = error_of(kMla, {{"model.head_dim", "128"}});
  EXPECT_TRUE(has(dim, "does not apply with model.attention: mla")) << dim;
  const std::string kv = error_of(kMla, {{"model.kv_heads", "4"}});
  EXPECT_TRUE(has(kv, "model.kv_heads does not apply")) << kv;
  // MLA has programs with SwiGLU and RMSNorm only; the message names the triple.
  const std::string gelu = error_of(kMla, {{"model.ffn_type", "gelu"}});
  EXPECT_TRUE(has(gelu, "tiny.yaml:6:")) << gelu;
  EXPECT_TRUE(has(gelu, "gelu with model.norm rmsnorm and attention mla has no layer programs")) << gelu;
  EXPECT_TRUE(has(gelu, "swiglu with rmsnorm and attention mla (workloads/mla_layer_*)")) << gelu;
}

// DeepSeek-V3: 671B parameters (arXiv:2412.19437, section 1; the main model,
// the multi-token-prediction module's 14B apart). By hand, the attention:
// down-projections 7168 x 1536 and 7168 x (512 + 64), up-projections
// 1536 x 128 x 192 and 512 x 128 x (128 + 128), projection 128 x 128 x 7168,
// the latents' norms 1536 + 512.
TEST(StepParameters, DeepSeekV3MatchesThePublishedTotal) {
  const ModelSpec s = load_model("deepseek-v3");
  const Transformer& m = s.model;
  const double h = 7168;
  const double attention = h * 1536 + h * 576 + 1536.0 * 128 * 192 + 512.0 * 128 * 256 + 128.0 * 128 * h;
  EXPECT_DOUBLE_EQ(m.attention_weights(), attention);
  EXPECT_DOUBLE_EQ(layer_parameters(m), attention + 2048 + 3 * h * 18432 + 2 * h);
  const double total = 3 * layer_parameters(m) +
                       58 * (moe_layer_dense_parameters(s) + expert_parameters(s)) + 2 * 129280 * h + h;
  EXPECT_NEAR(total / 671e9, 1.0, 0.005) << total / 1e9 << "B";
}

// DeepSeek-V3's multi-token-prediction module: 14B parameters (the released
// checkpoint's model card: 685B = 671B main model + 14B MTP module, whose
// layer 61 keeps its own embedding and output head). What coconet puts on
// the last stage for it, its experts over ep x etp and the rest over tp, with
// the output head it shares with the model there.
TEST(StepParameters, DeepSeekV3MtpModuleMatchesThePublishedSize) {
  const ModelSpec with = load_model("deepseek-v3");
  ASSERT_EQ(with.model.mtp_layers, 1);
  ModelSpec without = with;
  without.model.mtp_layers = 0;
  const Layout l = resolve_layout(with, h100(128));
  const int last = l.pp - 1;
  const double dense = (stage_parameters(with, l, last) - stage_parameters(without, l, last)) * l.tp;
  const double experts =
      (stage_expert_parameters(with, l, last) - stage_expert_parameters(without, l, last)) * l.ep * l.etp;
  const double head = 129280.0 * 7168;
  EXPECT_NEAR((dense + experts + head) / 14e9, 1.0, 0.05) << (dense + experts + head) / 1e9 << "B";
}

// MLA's FLOPs per token: its attention GEMMs (attention_weights) and the
// scores at nope + rope, the context at v_head_dim: a wider value head adds
// its up-projection's and projection's columns and its share of the core.
TEST(StepFlops, MlaCountsTheScoresAndTheContextAtTheirOwnHeadDims) {
  const Transformer m = parse_model(kMla, "tiny.yaml").model;
  const Transformer wide_v = parse_model(kMla, "tiny.yaml", {{"model.v_head_dim", "96"}}).model;
  const double a = 16, s = 2048, h = 1024, extra = 32;  // v_head_dim 64 -> 96
  const double weights = 128 * a * extra + a * extra * h;  // kv up-projection, projection
  const double core = 2 * s * a * extra;                   // the context P V
  EXPECT_DOUBLE_EQ(layer_forward_flops_per_token(wide_v) - layer_forward_flops_per_token(m), 2 * weights + core);
  // The core at equal widths is multi-head attention's 4 s a D.
  EXPECT_DOUBLE_EQ(layer_forward_flops_per_token(m) - 2 * (m.attention_weights() + 3 * h * 2816),
                   2 * s * a * (96 + 64));
}

// recompute mla_up_proj (Megatron-core's recompute_modules mla_up_proj):
// each layer drops Q, K and V (a (2 D + v) per token over tp) and runs the
// two up-projections again in its backward; its FLOPs count them again. It
// needs MLA: elsewhere an error naming the key.
TEST(StepRecompute, MlaUpProjectionsAreRunAgainAndTheirOutputsDropped) {
  const sim::Topology t = h100(1);
  const ModelSpec none = parse_model(kMla, "tiny.yaml", {{"parallel.dp", "4"}});
  const ModelSpec up = parse_model(kMla, "tiny.yaml", {{"parallel.dp", "4"}, {"parallel.recompute", "mla_up_proj"}});
  const Layout l = resolve_layout(up, t);
  const double a = 16, s = 2048, tp = 2;
  const double qkv = a * (2 * (64 + 32) + 64);  // the per-token widths the attention core reads
  EXPECT_DOUBLE_EQ(layer_activation_bytes(none, l, AttentionMemory::flash, false) -
                       layer_activation_bytes(up, l, AttentionMemory::flash, false),
                   2 * s * qkv / tp);
  const StepReport r0 = predict_step(none, t), r1 = predict_step(up, t);
  EXPECT_EQ(r0.layer.recompute_us, 0);
  EXPECT_GT(r1.layer.recompute_us, 0);
  EXPECT_LT(r1.layer.recompute_us, r1.layer.fwd_gemm_us / 2);
  EXPECT_GT(r1.step_us, r0.step_us);
  const double up_weights = 384 * a * 96 + 128 * a * (64 + 64);
  EXPECT_DOUBLE_EQ(up.model.up_projection_weights(), up_weights);
  EXPECT_NEAR(hardware_flops(up) - hardware_flops(none), 32.0 * s * 4 * 2 * up_weights, 1e-9 * hardware_flops(up));
  const std::string gqa = error_of(kLlama, {{"parallel.recompute", "mla_up_proj"}});
  EXPECT_TRUE(has(gqa, "parallel.recompute mla_up_proj runs multi-head latent attention's up-projections again: "
                       "it needs model.attention: mla")) << gqa;
  const std::string dense = error_of(kLlama, {{"parallel.recompute", "moe"}});
  EXPECT_TRUE(has(dense, "parallel.recompute moe runs each MoE layer's MLP again: it needs a moe section")) << dense;
}

// --search tries mla_up_proj beside none, selective and full for an MLA
// model, and only for one.
TEST(StepRecompute, TheSearchTriesMlaUpProjectionsForMlaOnly) {
  SearchOptions o;
  o.vary_micro_batch = o.vary_tp = o.vary_cp = o.vary_pp = o.vary_schedule = o.vary_zero = false;
  o.vary_sequence_parallel = o.vary_precision = false;
  o.keep = 10;
  const auto tried = [&](const char* yaml) {
    std::vector<Recompute> out;
    for (const StepReport& r : search_layouts(parse_model(yaml, "tiny.yaml", {{"parallel.dp", "4"}}), h100(1), o).best)
      out.push_back(r.spec.parallel.recompute);
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(tried(kMla), (std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full,
                                                  Recompute::mla_up_proj}));
  EXPECT_EQ(tried(kLlama), (std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full}));
}

TEST(StepLayerBlock, MlaChoosesItsProgramsAndBindsTheLatents) {
  const ModelSpec s = load_model("deepseek-v3");
  const sim::Topology t = h100(128);
  const Layout l = resolve_layout(s, t);
  LayerShape x = step_layer_shape(s, l);
  EXPECT_EQ(x.family, Family::mla);
  EXPECT_EQ(layer_programs(x).first, "mla_layer_sp_fwd");
  EXPECT_EQ(layer_programs(x).second, "mla_layer_sp_bwd");
  x.sequence_parallel = false;
  EXPECT_EQ(layer_programs(x).first, "mla_layer_fwd");
  const model::Bindings b = layer_bindings(x);
  EXPECT_EQ(b.at("QR"), 1536);
  EXPECT_EQ(b.at("KR"), 512);
  EXPECT_EQ(b.at("KE"), 576);   // the kv down-projection: latent and shared rotary key
  EXPECT_EQ(b.at("DQ"), 192);   // a query's and key's head: 128 + 64
  EXPECT_EQ(b.at("DV"), 128);
  EXPECT_EQ(b.at("DKV"), 256);  // the kv up-projection's columns per head: 128 + 128
  for (const char* w : {"mla_layer_fwd", "mla_layer_bwd", "mla_layer_sp_fwd", "mla_layer_sp_bwd"}) {
    const model::Program p = model::load_program(model::resolve_workload(w));
    const model::Bindings bound = p.bind(b);
    for (const auto& in : p.inputs)
      if (in.name == "wukv") {
        EXPECT_EQ(model::eval_shape(in.type.shape, bound)[1], 128 * 256) << w;
      }
  }
  // A step prices them: flash attention and MLA's own GEMMs.
  const StepReport r = predict_step(s, t);
  EXPECT_TRUE(r.layer_fwd_schedule.find("FA") != std::string::npos) << r.layer_fwd_schedule;
  EXPECT_GT(r.moe_layer.fwd_gemm_us, r.layer.fwd_gemm_us * 0.5);
}

}  // namespace
}  // namespace coconet::step
