// Kernel choices (model/kernel_fusion.h): fuse_kernel and flash_attention as
// schedule transformations, their pricing as one kernel where the software
// has fused kernels (plan::Capabilities::fused_kernels), FP8 GEMMs, and the
// tuner's choice of them for a step's layer.
#include <gtest/gtest.h>

#include <string>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/kernel_fusion.h"
#include "model/parse.h"
#include "model/transforms.h"
#include "sim/compute.h"
#include "sim/simulator.h"
#include "sim/tasks.h"
#include "sim/topology.h"
#include "step/layer_block.h"

namespace {

using namespace coconet;

model::Program program(const std::string& name) {
  return model::load_program(model::resolve_workload(name));
}

// The llama forward at a step's shapes (b 1, s 2048, 8 K/V groups of 8 heads of 128, tp 1), in bf16.
model::Bindings llama_sizes() {
  return {{"B", 1}, {"S", 2048}, {"H", 8192}, {"KV", 8}, {"G", 8}, {"GQ", 10}, {"D", 128}, {"F", 28672}};
}

model::Program at_bf16(model::Program p) {
  for (auto& in : p.inputs) in.type.dtype = model::DType::bf16;
  model::check(p);
  return p;
}

const plan::Op* kernel_op(const plan::StepPlan& plan) {
  for (const auto& op : plan.ops)
    if (op.kernel) return &op;
  return nullptr;
}

TEST(KernelFusion, ChoicesOfTheLlamaForward) {
  const model::Program p = program("llama_layer_fwd");
  const auto choices = model::kernel_choices(model::baseline(p), "causal");
  ASSERT_EQ(choices.size(), 4u);  // as written, fused kernels, flash attention, both
  EXPECT_FALSE(model::uses_fused_kernels(choices[0]) || model::uses_flash_attention(choices[0]));
  EXPECT_TRUE(model::uses_fused_kernels(choices[1]) && !model::uses_flash_attention(choices[1]));
  EXPECT_TRUE(model::uses_flash_attention(choices[2]) && !model::uses_fused_kernels(choices[2]));
  EXPECT_TRUE(model::uses_flash_attention(choices[3]) && model::uses_fused_kernels(choices[3]));
  EXPECT_NE(choices[2].name().find("FA"), std::string::npos) << choices[2].name();
  EXPECT_NE(choices[1].name().find("K"), std::string::npos) << choices[1].name();
}

TEST(KernelFusion, RoundTripsThroughYaml) {
  const model::Program p = program("megatron_layer_bwd");
  for (const auto& s : model::kernel_choices(model::baseline(p), "causal")) {
    const model::Schedule back = model::schedule_from_yaml(p, model::to_yaml(s));
    EXPECT_EQ(back.name(), s.name());
    EXPECT_EQ(back.history, s.history);
  }
}

TEST(KernelFusion, IllegalDirectivesAreRefused) {
  const model::Schedule s = model::baseline(program("llama_layer_fwd"));
  // Not a whole compute stage, a GEMM, an unknown mask, a linear layer's GEMM.
  EXPECT_THROW((void)model::fuse_kernel(s, "one1", "sq1"), UserError);
  EXPECT_THROW((void)model::fuse_kernel(s, "qkv", "qkv"), UserError);
  EXPECT_THROW((void)model::flash_attention(s, "sc", "ctx", "sliding"), UserError);
  EXPECT_THROW((void)model::flash_attention(s, "qkv", "ctx", "causal"), UserError);
  EXPECT_NO_THROW((void)model::flash_attention(s, "sc", "ctx", "causal"));
  // Program transformations come first.
  const model::Schedule k = model::fuse_kernel(s, "one1", "n1");
  EXPECT_THROW((void)model::split(k, "z"), UserError);
}

// The softmax as one kernel reads the scores once and writes the
// probabilities once, where its five kernels make five passes.
TEST(KernelFusion, AFusedSoftmaxIsOnePass) {
  const model::Program p = at_bf16(program("llama_layer_fwd"));
  const model::Schedule fused = model::fuse_kernel(model::baseline(p), "ss", "pr");
  sim::Context ctx{sim::load_topology("dgx-h100"), 1, p.bind(llama_sizes()), std::nullopt};
  ctx.fused_kernels = true;
  const plan::StepPlan plan = sim::lower_for(fused, ctx);
  const plan::Op* k = kernel_op(plan);
  ASSERT_NE(k, nullptr);
  const double scores = 1.0 * 8 * 8 * 2048 * 2048 * 2;  // [B KV, G S, S] in bf16
  const double rows = 1.0 * 8 * 8 * 2048 * 2;           // mx and den: one value per row
  EXPECT_NEAR(k->kernel->work.hbm_bytes, 2 * scores, 4 * rows);
  // Without fused kernels the same schedule is priced as its parts.
  sim::Context parts = ctx;
  parts.fused_kernels = false;
  EXPECT_EQ(kernel_op(sim::lower_for(fused, parts)), nullptr);
  EXPECT_LT(sim::predict_analytic(fused, ctx).time_us, sim::predict_analytic(fused, parts).time_us);
}

// Flash attention: half the score blocks (causal), no s x s tensor in memory;
// the backward recomputes the probabilities (a fifth GEMM) instead of reading them.
TEST(KernelFusion, FlashAttentionCost) {
  const double gemm = 2.0 * 8 * (8 * 2048) * 2048 * 128;  // one of the core's GEMMs, all groups
  const sim::Topology h100 = sim::load_topology("dgx-h100");
  {
    const model::Program p = at_bf16(program("llama_layer_fwd"));
    const model::Schedule fa = model::flash_attention(model::baseline(p), "sc", "ctx", "causal");
    sim::Context ctx{h100, 1, p.bind(llama_sizes()), std::nullopt};
    ctx.fused_kernels = true;
    const plan::Op* k = kernel_op(sim::lower_for(fa, ctx));
    ASSERT_NE(k, nullptr);
    EXPECT_DOUBLE_EQ(k->kernel->attention_flops, model::kCausalShare * 2 * gemm);
    const double qkvo = 4.0 * 8 * 8 * 2048 * 128 * 2 - 2.0 * 8 * 7 * 2048 * 128 * 2;  // q, ctx; one k, v a group
    EXPECT_DOUBLE_EQ(k->kernel->work.hbm_bytes, qkvo);
    const model::Schedule full = model::flash_attention(model::baseline(p), "sc", "ctx", "full");
    EXPECT_DOUBLE_EQ(kernel_op(sim::lower_for(full, ctx))->kernel->attention_flops, 2 * gemm);
  }
  {
    model::Bindings b = llama_sizes();
    const model::Program p = at_bf16(program("llama_layer_bwd"));
    const model::Schedule fa = model::flash_attention(model::baseline(p), "dv", "dkt", "causal");
    sim::Context ctx{h100, 1, p.bind(b), std::nullopt};
    ctx.fused_kernels = true;
    const plan::Op* k = kernel_op(sim::lower_for(fa, ctx));
    ASSERT_NE(k, nullptr);
    EXPECT_DOUBLE_EQ(k->kernel->attention_flops, model::kCausalShare * 5 * gemm);
    const double scores = 1.0 * 8 * 8 * 2048 * 2048 * 2;
    EXPECT_LT(k->kernel->work.hbm_bytes, scores / 4);  // neither pr nor prt is read
  }
}

TEST(KernelFusion, Fp8GemmsRunAtTheFp8RateWithTheirCast) {
  const sim::Topology h100 = sim::load_topology("dgx-h100");
  sim::GemmShape g{8192, 8192, 8192, model::DType::bf16};
  const double bf16 = sim::gemm_body_us(h100, g, h100.gpu.sms);
  g.fp8 = true;
  const double fp8 = sim::gemm_body_us(h100, g, h100.gpu.sms);
  EXPECT_NEAR(bf16 / fp8, *h100.gpu.tflops_fp8 / h100.gpu.tflops_bf16, 0.01);
  EXPECT_DOUBLE_EQ(sim::fp8_cast_body_us(h100, 1e9), 3e9 / (h100.gpu.hbm_effective_GBps() * 1e3));
  sim::Topology a100 = sim::load_topology("dgx-a100");
  EXPECT_THROW((void)sim::gemm_body_us(a100, g, a100.gpu.sms), UserError);
}

// With FP8 GEMMs, an allgather whose result is a GEMM's first operand moves
// that operand cast to FP8 (Transformer Engine quantizes the norm's output
// before the sequence-parallel gather): one byte an element, half a bf16
// gather; the GEMM then casts only this rank's slice. A reduce-scatter
// moves bf16 either way.
TEST(KernelFusion, Fp8AllGathersMoveTheCastOperand) {
  const sim::Topology h100 = sim::load_topology("dgx-h100");
  const model::Program p = at_bf16(program("llama_layer_sp_fwd"));
  constexpr int kTp = 8;
  const model::Bindings sizes{{"B", 1}, {"S", 4096}, {"H", 8192}, {"KV", 8}, {"G", 8}, {"GQ", 10}, {"D", 128}, {"F", 28672}};
  sim::Context ctx{h100, kTp, p.bind(sizes), std::nullopt};
  const plan::StepPlan plan = sim::lower_for(model::baseline(p), ctx);
  int gathers = 0, gathered_gemms = 0;
  for (const plan::Op& op : plan.ops) {
    for (const plan::Collective& c : op.work.collectives) {
      if (c.op == model::OpKind::allgather) {
        ++gathers;
        EXPECT_DOUBLE_EQ(c.fp8_bytes, c.bytes / 2) << c.stmt;
      } else {
        EXPECT_EQ(c.fp8_bytes, 0) << c.stmt;
      }
    }
    if (op.work.gemm && op.work.gemm->a_gathered > 1) {
      ++gathered_gemms;
      EXPECT_EQ(op.work.gemm->a_gathered, kTp);
    }
  }
  EXPECT_EQ(gathers, 2);         // before the QKV and the FC1/FC3 GEMMs
  EXPECT_EQ(gathered_gemms, 3);  // QKV, FC1 and FC3 read the gathered values
  const auto stage_us = [&](bool fp8, const std::string& code) {
    sim::Context c = ctx;
    c.fp8_gemms = fp8;
    double us = 0;
    for (const sim::StageTiming& st : sim::simulate(plan, c).stages)
      if (st.code == code) us += st.alone_us;
    return us;
  };
  // Half the bytes at NVLink's bandwidth: a little over half the time (the latency stays).
  EXPECT_LT(stage_us(true, "AG"), 0.6 * stage_us(false, "AG"));
  EXPECT_GT(stage_us(true, "AG"), 0.5 * stage_us(false, "AG"));
  EXPECT_DOUBLE_EQ(stage_us(true, "RS"), stage_us(false, "RS"));
}

// The tuner picks flash attention and the fused kernels for a Llama layer
// at s 8192 on H100, and the layer is faster than with the attention
// materialised and every element-wise statement its own pass.
TEST(KernelFusion, TheTunerChoosesFlashAttentionAndFusedKernels) {
  step::LayerShape x;
  x.micro_batch = 1;
  x.sequence = 8192;
  x.heads = 64;
  x.head_dim = 128;
  x.ffn = 28672;
  x.tp = 8;
  x.sequence_parallel = true;
  x.family = step::Family::llama;
  x.hidden = 8192;
  x.kv_heads = 8;
  step::LayerBlockPricer pricer(sim::load_topology("dgx-h100"));
  const step::LayerBlock b = pricer.price(x);
  EXPECT_TRUE(b.fwd.flash_attention && b.bwd.flash_attention) << b.fwd.schedule << " / " << b.bwd.schedule;
  EXPECT_TRUE(b.fwd.fused_kernels && b.bwd.fused_kernels) << b.fwd.schedule << " / " << b.bwd.schedule;
  // The flash-attention kernel at FlashAttention-3's measured rate (forward,
  // head dim 128, bf16 on H100: 614 TFLOP/s, Shah et al. 2024, the figure
  // dgx-h100.yaml cites) times the share a training run sustains
  // (gpu.sustained_share) on the causal attention's FLOPs: Q K^T and P V, 2 s^2 d
  // each per head, half of them under the causal mask; 8 heads a GPU; one launch.
  constexpr double kFa3Tflops = 614;
  const sim::Topology h100 = sim::load_topology("dgx-h100");
  const double causal_flops = 2.0 * 2 * 8192.0 * 8192 * 128 * (64 / 8) / 2;
  const double expected_us = causal_flops / (kFa3Tflops * h100.gpu.sustained() * 1e6) + h100.gpu.launch_us;
  EXPECT_NEAR(b.fwd.attention_us, expected_us, 0.01 * expected_us);
  x.fp8 = true;
  const step::LayerBlock f = pricer.price(x);
  EXPECT_LT(f.fwd.gemm_us, b.fwd.gemm_us);
  EXPECT_GT(f.fwd.gemm_us, b.fwd.gemm_us / 2);  // the attention stays in bf16, the casts are paid
}

}  // namespace
