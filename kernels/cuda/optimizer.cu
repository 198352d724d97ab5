// Fused Adam and LAMB on one shard (see optimizer.h for the formulas).
//
// Design notes
// - Bandwidth bound: each thread moves 8 elements per step with 16-byte
//   loads/stores (vec.cuh) when every pointer is aligned; otherwise the same
//   kernel walks element by element. The branch is uniform across the grid.
// - Math in f32 whatever the storage type; the per-element formulas live in
//   small __device__ functions shared by the fused and unfused kernels.
// - LAMB's norms: phase 1 writes one partial pair per block (fixed grid), a
//   one-block kernel adds them in block order, so sums are deterministic.
#include <cuda_runtime.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/vec.cuh"

namespace coconet::kernels::cuda {
namespace {

// c1, c2: 1 - b1 and 1 - b2 (AdamHyper folds them in double; LAMB passes them in f32).
__device__ __forceinline__ void adam_moments(float g, float& m, float& v, float b1, float c1, float b2,
                                             float c2) {
  m = b1 * m + c1 * g;
  v = b2 * v + c2 * g * g;
}

__device__ __forceinline__ float adam_weight(float w, float m, float v, const AdamHyper& h) {
  return w - h.lr * m / (sqrtf(v) + h.eps);
}

__device__ __forceinline__ float lamb_direction(float w, float m, float v, const LambHyper& h) {
  return m / (sqrtf(v) + h.eps) + h.wd * w;
}

template <typename G, typename S>
struct ShardPtrs {
  const G* g;
  S* w;
  S* m;
  S* v;
  std::int64_t n;
  bool vec;
};

template <typename G, typename S>
ShardPtrs<G, S> ptrs_of(const OptimizerShard& s) {
  ShardPtrs<G, S> p{static_cast<const G*>(s.g.data), static_cast<S*>(s.w.data),
                    static_cast<S*>(s.m.data), static_cast<S*>(s.v.data), s.g.size, false};
  p.vec = aligned16(p.g) && aligned16(p.w) && aligned16(p.m) && aligned16(p.v);
  return p;
}

// One 16-byte group of every operand of an optimizer shard, widened to f32.
template <typename G, typename S>
__device__ __forceinline__ void load_shard(const ShardPtrs<G, S>& p, std::int64_t i, float (&g)[kVecElems],
                                           float (&w)[kVecElems], float (&m)[kVecElems],
                                           float (&v)[kVecElems]) {
  load_vec(p.g + i, g);
  load_vec(p.w + i, w);
  load_vec(p.m + i, m);
  load_vec(p.v + i, v);
}

template <typename G, typename S>
__global__ void __launch_bounds__(kBlockThreads) adam_kernel(ShardPtrs<G, S> p, AdamHyper h) {
  auto one = [&](std::int64_t i) {
    float m = to_f32(p.m[i]), v = to_f32(p.v[i]);
    adam_moments(to_f32(p.g[i]), m, v, h.beta1, h.one_minus_beta1, h.beta2, h.one_minus_beta2);
    p.w[i] = from_f32<S>(adam_weight(to_f32(p.w[i]), m, v, h));
    p.m[i] = from_f32<S>(m);
    p.v[i] = from_f32<S>(v);
  };
  auto group = [&](std::int64_t i) {
    float g[kVecElems], w[kVecElems], m[kVecElems], v[kVecElems];
    load_shard(p, i, g, w, m, v);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) {
      adam_moments(g[k], m[k], v[k], h.beta1, h.one_minus_beta1, h.beta2, h.one_minus_beta2);
      w[k] = adam_weight(w[k], m[k], v[k], h);
    }
    store_vec(p.w + i, w);
    store_vec(p.m + i, m);
    store_vec(p.v + i, v);
  };
  if (p.vec)
    for_each_vec(p.n, group, one);
  else
    for_each_scalar(p.n, one);
}

// The unfused baseline: one statement of adam.yaml per launch.
enum class AdamStatement { m1, v1, w1 };

template <typename G, typename S>
__global__ void __launch_bounds__(kBlockThreads)
    adam_statement_kernel(ShardPtrs<G, S> p, AdamHyper h, AdamStatement which) {
  for_each_scalar(p.n, [&](std::int64_t i) {
    switch (which) {
      case AdamStatement::m1: {
        const float g = to_f32(p.g[i]);
        p.m[i] = from_f32<S>(h.beta1 * to_f32(p.m[i]) + h.one_minus_beta1 * g);
        break;
      }
      case AdamStatement::v1: {
        const float g = to_f32(p.g[i]);
        p.v[i] = from_f32<S>(h.beta2 * to_f32(p.v[i]) + h.one_minus_beta2 * g * g);
        break;
      }
      case AdamStatement::w1:
        p.w[i] = from_f32<S>(adam_weight(to_f32(p.w[i]), to_f32(p.m[i]), to_f32(p.v[i]), h));
        break;
    }
  });
}

template <typename G, typename S>
__global__ void __launch_bounds__(kBlockThreads)
    lamb_moments_kernel(ShardPtrs<G, S> p, LambHyper h, double* partials) {
  float sum_w = 0.0f, sum_u = 0.0f;
  auto one = [&](std::int64_t i) {
    float m = to_f32(p.m[i]), v = to_f32(p.v[i]);
    const float w = to_f32(p.w[i]);
    adam_moments(to_f32(p.g[i]), m, v, h.beta1, 1.0f - h.beta1, h.beta2, 1.0f - h.beta2);
    const float u = lamb_direction(w, m, v, h);
    sum_w += w * w;
    sum_u += u * u;
    p.m[i] = from_f32<S>(m);
    p.v[i] = from_f32<S>(v);
  };
  auto group = [&](std::int64_t i) {
    float g[kVecElems], w[kVecElems], m[kVecElems], v[kVecElems];
    load_shard(p, i, g, w, m, v);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) {
      adam_moments(g[k], m[k], v[k], h.beta1, 1.0f - h.beta1, h.beta2, 1.0f - h.beta2);
      const float u = lamb_direction(w[k], m[k], v[k], h);
      sum_w += w[k] * w[k];
      sum_u += u * u;
    }
    store_vec(p.m + i, m);
    store_vec(p.v + i, v);
  };
  if (p.vec)
    for_each_vec(p.n, group, one);
  else
    for_each_scalar(p.n, one);
  const double bw = block_sum(sum_w);
  const double bu = block_sum(sum_u);
  if (threadIdx.x == 0) {
    partials[kLambSums * blockIdx.x] = bw;
    partials[kLambSums * blockIdx.x + 1] = bu;
  }
}

// One block adds the per-block partials in a fixed order.
__global__ void __launch_bounds__(kBlockThreads)
    lamb_finish_kernel(const double* partials, int blocks, double* sums) {
  for (int j = 0; j < kLambSums; ++j) {
    double x = 0.0;
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) x += partials[kLambSums * b + j];
    x = block_sum(x);
    if (threadIdx.x == 0) sums[j] = x;
  }
}

template <typename G, typename S>
__global__ void __launch_bounds__(kBlockThreads)
    lamb_apply_kernel(ShardPtrs<G, S> p, LambHyper h, const double* sums) {
  const float ratio = static_cast<float>(sqrt(sums[0]) / sqrt(sums[1]));
  auto one = [&](std::int64_t i) {
    const float w = to_f32(p.w[i]);
    p.w[i] = from_f32<S>(w - h.lr * ratio * lamb_direction(w, to_f32(p.m[i]), to_f32(p.v[i]), h));
  };
  auto group = [&](std::int64_t i) {
    float w[kVecElems], m[kVecElems], v[kVecElems];
    load_vec(p.w + i, w);
    load_vec(p.m + i, m);
    load_vec(p.v + i, v);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) w[k] -= h.lr * ratio * lamb_direction(w[k], m[k], v[k], h);
    store_vec(p.w + i, w);
  };
  if (p.vec)
    for_each_vec(p.n, group, one);
  else
    for_each_scalar(p.n, one);
}

// Calls f(ShardPtrs<G, S>) with the shard's storage types.
template <typename F>
void with_shard(const OptimizerShard& s, F&& f) {
  validate(s);
  with_storage(s.g.dtype, [&](auto g) {
    with_storage(s.w.dtype, [&](auto w) { f(ptrs_of<decltype(g), decltype(w)>(s)); });
  });
}

std::int64_t items_of(std::int64_t n, bool vec) { return vec ? (n + kVecElems - 1) / kVecElems : n; }

// Blocks of a grid-stride launch of `kernel`: as many as the device holds
// resident (kernels/cuda/occupancy.h), no more than the work needs.
template <typename... Args>
int grid_for(void (*kernel)(Args...), std::int64_t n, bool vec) {
  return grid_for_kernel(kernel, items_of(n, vec));
}

}  // namespace

void validate(const OptimizerShard& s) {
  const std::int64_t n = s.g.size;
  require_size(s.w, n, "optimizer shard w");
  require_size(s.m, n, "optimizer shard m");
  require_size(s.v, n, "optimizer shard v");
  require_same_dtype(s.w, s.m, "optimizer shard w and m");
  require_same_dtype(s.w, s.v, "optimizer shard w and v");
}

void adam_step(const OptimizerShard& s, const AdamHyper& h, cudaStream_t stream) {
  with_shard(s, [&](auto p) {
    if (p.n == 0) return;
    using P = decltype(p);
    const int grid = grid_for(static_cast<void (*)(P, AdamHyper)>(adam_kernel), p.n, p.vec);
    adam_kernel<<<grid, kBlockThreads, 0, stream>>>(p, h);
    COCONET_CUDA_CHECK_LAUNCH();
  });
}

void adam_step_unfused(const OptimizerShard& s, const AdamHyper& h, cudaStream_t stream) {
  with_shard(s, [&](auto p) {
    if (p.n == 0) return;
    using P = decltype(p);
    const int grid =
        grid_for(static_cast<void (*)(P, AdamHyper, AdamStatement)>(adam_statement_kernel), p.n, false);
    for (AdamStatement which : {AdamStatement::m1, AdamStatement::v1, AdamStatement::w1}) {
      adam_statement_kernel<<<grid, kBlockThreads, 0, stream>>>(p, h, which);
      COCONET_CUDA_CHECK_LAUNCH();
    }
  });
}

std::size_t lamb_workspace_bytes() {
  return sizeof(double) * (kLambSums + static_cast<std::size_t>(kLambSums) * kReductionBlocks);
}

void lamb_moments(const OptimizerShard& s, const LambHyper& h, double* workspace,
                  cudaStream_t stream) {
  with_shard(s, [&](auto p) {
    double* partials = workspace + kLambSums;
    // A grid fixed by n alone, so the partial sums add in the same order on any device.
    const int blocks = blocks_for(items_of(p.n, p.vec), kBlockThreads, kReductionBlocks);
    lamb_moments_kernel<<<blocks, kBlockThreads, 0, stream>>>(p, h, partials);
    COCONET_CUDA_CHECK_LAUNCH();
    lamb_finish_kernel<<<1, kBlockThreads, 0, stream>>>(partials, blocks, workspace);
    COCONET_CUDA_CHECK_LAUNCH();
  });
}

void lamb_apply(const OptimizerShard& s, const LambHyper& h, const double* sums,
                cudaStream_t stream) {
  with_shard(s, [&](auto p) {
    if (p.n == 0) return;
    using P = decltype(p);
    const int grid = grid_for(static_cast<void (*)(P, LambHyper, const double*)>(lamb_apply_kernel), p.n, p.vec);
    lamb_apply_kernel<<<grid, kBlockThreads, 0, stream>>>(p, h, sums);
    COCONET_CUDA_CHECK_LAUNCH();
  });
}

void lamb_step(const OptimizerShard& s, const LambHyper& h, double* workspace,
               cudaStream_t stream) {
  lamb_moments(s, h, workspace, stream);
  lamb_apply(s, h, workspace, stream);
}

}  // namespace coconet::kernels::cuda
