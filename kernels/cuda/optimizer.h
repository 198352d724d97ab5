// The paper's fused optimizer kernels, applied to one rank's shard of a
// reduce-scattered gradient: Adam in one pass, LAMB in two (its two norms are
// a reduction phase between the passes). The formulas are those of
// workloads/adam.yaml and workloads/lamb.yaml, computed in f32 over f16, bf16
// or f32 storage.
//
//   Adam: m1 = b1*m + (1-b1)*g;  v1 = b2*v + (1-b2)*g*g;  w1 = w - lr*m1/(sqrt(v1)+eps)
//   LAMB: the same moments, u = m1/(sqrt(v1)+eps) + wd*w,
//         w1 = w - lr*(||w|| / ||u||)*u   (norms over the whole tensor, all ranks)
//
// Multi-rank LAMB: lamb_moments leaves this shard's two sums of squares at
// workspace[0..1] (doubles); the caller allreduces those two values over the
// ranks, then calls lamb_apply. One rank: lamb_step does both.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/cuda/view.h"

namespace coconet::kernels::cuda {

// One rank's shard: the reduced gradient (read) and the state (updated in
// place). w, m, v share one storage type; g may differ (e.g. f16 gradients).
struct OptimizerShard {
  DeviceView g;
  DeviceView w;
  DeviceView m;
  DeviceView v;
};

// Adam's defaults (Kingma & Ba 2015, section 2), as workloads/adam.yaml.
inline constexpr double kAdamBeta1 = 0.9;
inline constexpr double kAdamBeta2 = 0.999;

// one_minus_beta1/2 are 1 - beta computed in double and rounded once, as the
// compiled element-wise programs fold constants (model/elementwise_program.h),
// so the fused kernels agree with the unfused program to the ulp. Set all
// fields through adam_hyper() when the betas are not the defaults.
struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = static_cast<float>(kAdamBeta1);
  float beta2 = static_cast<float>(kAdamBeta2);
  float eps = 1e-8f;
  float one_minus_beta1 = static_cast<float>(1.0 - kAdamBeta1);
  float one_minus_beta2 = static_cast<float>(1.0 - kAdamBeta2);
};

[[nodiscard]] inline AdamHyper adam_hyper(double lr, double beta1, double beta2, double eps) {
  return {static_cast<float>(lr),          static_cast<float>(beta1),       static_cast<float>(beta2),
          static_cast<float>(eps),         static_cast<float>(1.0 - beta1), static_cast<float>(1.0 - beta2)};
}

struct LambHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-6f;
  float wd = 0.01f;
};

// Checks a shard's views (sizes equal, w/m/v one dtype); throws UserError.
void validate(const OptimizerShard& s);

// Adam in one kernel: reads g, w, m, v once and writes w, m, v once.
void adam_step(const OptimizerShard& s, const AdamHyper& h, cudaStream_t stream);
// The same update as three kernels, one per statement of adam.yaml (the
// unfused baseline every framework without fusion runs).
void adam_step_unfused(const OptimizerShard& s, const AdamHyper& h, cudaStream_t stream);

// Number of doubles of the LAMB workspace: the two sums, then per-block partials.
inline constexpr int kLambSums = 2;
[[nodiscard]] std::size_t lamb_workspace_bytes();

// Phase 1: moments (m, v written) and this shard's sums of squares of w and u
// at workspace[0] and workspace[1]. Deterministic: a fixed grid and a fixed
// order of addition.
void lamb_moments(const OptimizerShard& s, const LambHyper& h, double* workspace,
                  cudaStream_t stream);
// Phase 2: w1 = w - lr*sqrt(sums[0])/sqrt(sums[1])*u, u recomputed from m, v, w.
void lamb_apply(const OptimizerShard& s, const LambHyper& h, const double* sums,
                cudaStream_t stream);
// Both phases on one rank (the shard is the whole tensor).
void lamb_step(const OptimizerShard& s, const LambHyper& h, double* workspace,
               cudaStream_t stream);

}  // namespace coconet::kernels::cuda
