// fuse(RS-C-AG) for Adam: the LSA kernel and the host-API fallback (see
// fused_allreduce.h).
//
// Design notes
// - Bytes: each rank reads its shard of the P gradients once (the bytes of a
//   reduce-scatter), reads and writes its m, v, w shard once (the update, the
//   one extra HBM pass), and writes its new w shard to P windows (the bytes
//   of an allgather). No intermediate shard is stored.
// - CTA b of every rank works on the same part of its own shard and uses LSA
//   barrier b, so the exit barrier of CTA b orders exactly the stores its
//   peers' CTA b made into this rank's window.
// - Barriers are acq_rel: entry makes peers' gradients (written before their
//   launch) visible; exit makes every peer's weight stores visible before the
//   next kernel on this rank's stream reads w.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/collectives.h"
#include "kernels/cuda/fused_allreduce.h"
#include "kernels/cuda/lsa_comm_impl.cuh"
#include "kernels/cuda/vec.cuh"

namespace coconet::kernels::cuda {

namespace {

template <typename G, typename S>
struct FusedPtrs {
  ncclWindow_t g_win;
  ncclWindow_t w_win;
  S* m;
  S* v;
  std::int64_t n;
  AdamHyper h;
  bool vec;
};

template <typename T>
__device__ __forceinline__ T* lsa_ptr(ncclWindow_t win, std::int64_t index, int peer) {
  return static_cast<T*>(ncclGetLsaPointer(win, static_cast<size_t>(index) * sizeof(T), peer));
}

__device__ __forceinline__ void adam_element(float g, float& w, float& m, float& v,
                                             const AdamHyper& h) {
  m = h.beta1 * m + h.one_minus_beta1 * g;
  v = h.beta2 * v + h.one_minus_beta2 * g * g;
  w = w - h.lr * m / (sqrtf(v) + h.eps);
}

template <typename G, typename S>
__global__ void __launch_bounds__(kBlockThreads)
    fused_adam_lsa_kernel(ncclDevComm dev, FusedPtrs<G, S> p) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dev, ncclTeamTagLsa(), blockIdx.x);
  bar.sync(ncclCoopCta(), ::cuda::memory_order_acq_rel);
  const int peers = dev.lsaSize;
  const Span1d shard = shard_of(p.n, peers, dev.lsaRank);
  auto one = [&](std::int64_t i) {
    const std::int64_t gi = shard.begin + i;
    float g = 0.0f;
    for (int q = 0; q < peers; ++q) g += to_f32(*lsa_ptr<G>(p.g_win, gi, q));
    float w = to_f32(*lsa_ptr<S>(p.w_win, gi, dev.lsaRank));
    float m = to_f32(p.m[i]), v = to_f32(p.v[i]);
    adam_element(g, w, m, v, p.h);
    p.m[i] = from_f32<S>(m);
    p.v[i] = from_f32<S>(v);
    for (int q = 0; q < peers; ++q) *lsa_ptr<S>(p.w_win, gi, q) = from_f32<S>(w);
  };
  auto group = [&](std::int64_t i) {
    const std::int64_t gi = shard.begin + i;
    float g[kVecElems] = {}, part[kVecElems], w[kVecElems], m[kVecElems], v[kVecElems];
    for (int q = 0; q < peers; ++q) {
      load_vec(lsa_ptr<G>(p.g_win, gi, q), part);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) g[k] += part[k];
    }
    load_vec(lsa_ptr<S>(p.w_win, gi, dev.lsaRank), w);
    load_vec(p.m + i, m);
    load_vec(p.v + i, v);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) adam_element(g[k], w[k], m[k], v[k], p.h);
    store_vec(p.m + i, m);
    store_vec(p.v + i, v);
    for (int q = 0; q < peers; ++q) store_vec(lsa_ptr<S>(p.w_win, gi, q), w);
  };
  if (p.vec)
    for_each_vec(shard.size, group, one);
  else
    for_each_scalar(shard.size, one);
  bar.sync(ncclCoopCta(), ::cuda::memory_order_acq_rel);
}

void check_fused_views(const FusedAdamArgs& a, std::int64_t shard) {
  require_size(a.w, a.g.size, "fused adam w");
  require_size(a.m, shard, "fused adam m (this rank's shard)");
  require_size(a.v, shard, "fused adam v (this rank's shard)");
  require_same_dtype(a.w, a.m, "fused adam w and m");
  require_same_dtype(a.w, a.v, "fused adam w and v");
}

}  // namespace

void fused_adam_lsa(const LsaComm& comm, const SymmetricBuffer& g_buf,
                    const SymmetricBuffer& w_buf, const FusedAdamArgs& a, cudaStream_t stream) {
  if (a.g.data != g_buf.view().data || a.w.data != w_buf.view().data)
    throw UserError("fused adam (lsa): g and w must be the symmetric buffers' own views");
  const ncclDevComm& dev = comm.impl().dev;
  const Span1d shard = shard_of(a.g.size, dev.lsaSize, dev.lsaRank);
  check_fused_views(a, shard.size);
  with_storage(a.g.dtype, [&](auto gt) {
    with_storage(a.w.dtype, [&](auto wt) {
      using G = decltype(gt);
      using S = decltype(wt);
      FusedPtrs<G, S> p{g_buf.window(), w_buf.window(), static_cast<S*>(a.m.data),
                        static_cast<S*>(a.v.data), a.g.size, a.h, false};
      p.vec = (shard.begin * static_cast<std::int64_t>(sizeof(G))) % kVecBytes == 0 &&
              (shard.begin * static_cast<std::int64_t>(sizeof(S))) % kVecBytes == 0 &&
              aligned16(p.m) && aligned16(p.v);
      fused_adam_lsa_kernel<G, S><<<kFusedCtas, kBlockThreads, 0, stream>>>(dev, p);
      COCONET_CUDA_CHECK_LAUNCH();
    });
  });
}

void fused_adam_host(ncclComm_t comm, int rank, int ranks, const FusedAdamArgs& a,
                     DeviceView g_shard, cudaStream_t stream) {
  const Span1d mine = shard_of(a.g.size, ranks, rank);
  check_fused_views(a, mine.size);
  require_size(g_shard, mine.size, "fused adam gradient shard scratch");
  require_same_dtype(g_shard, a.g, "fused adam gradient shard scratch and g");
  std::vector<Part> g_parts, w_parts;
  for (int r = 0; r < ranks; ++r) {
    const Span1d s = shard_of(a.g.size, ranks, r);
    g_parts.push_back({static_cast<char*>(a.g.data) + s.begin * storage_bytes(a.g.dtype), s.size});
    w_parts.push_back({static_cast<char*>(a.w.data) + s.begin * storage_bytes(a.w.dtype), s.size});
  }
  reduce_scatter(comm, g_parts, {g_shard.data, mine.size}, a.g.dtype, model::ReduceOp::sum, rank,
                 stream);
  const DeviceView w_shard{w_parts[rank].data, mine.size, a.w.dtype};
  adam_step({g_shard, w_shard, a.m, a.v}, a.h, stream);
  allgather(comm, w_parts[rank], w_parts, a.w.dtype, rank, stream);
}

}  // namespace coconet::kernels::cuda
