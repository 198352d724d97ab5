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

struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

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
