// The tiled GEMM that publishes its row blocks and the communication kernel
// that takes them (see tile_gemm.h).
//
// Design notes
// - Order: the GEMM is persistent. Each CTA takes tickets from a device
//   counter (atomicAdd) until none is left, so tiles *start* in ticket order
//   whatever order the hardware schedules CTAs in; tile_plan.h numbers the
//   tiles block by block, each block's runs of rows in the order the
//   executor gives (its ring order: the slice reduced onto the next rank
//   first, this rank's own slice last).
// - Publication (release): after a tile's stores, __syncthreads() orders
//   every thread's stores before thread 0's next operations (bar.sync is a
//   CTA-scope fence for the CTA's threads, and the PTX memory model's
//   causality order is transitive), __threadfence() (fence.sc.gpu) by
//   thread 0 then orders them, cumulatively, before its atomicAdd on the
//   block's flag at device scope: fence + relaxed atomic = a release.
// - Consumption (acquire): one thread of each communication CTA loads the
//   flag with cuda::atomic_ref<..., thread_scope_device>::load(acquire)
//   until it reaches the block's tile count; __syncthreads() extends the
//   acquire to its CTA. The LSA barrier that follows (acq_rel, system
//   scope, NCCL's device API) carries it to the peers: a peer past the
//   barrier sees every store this rank's GEMM made to block b (release
//   sequences are cumulative), so it may read our window's block b.
// - Efficiency: correctness first. 64 x 64 tiles, K in steps of 32 staged
//   through shared memory with scalar loads, no multi-stage pipelining, no
//   Hopper wgmma/TMA: expect well below cuBLAS (the sm_90 cuBLAS kernels are
//   wgmma + TMA with 128 x 128+ tiles); unmeasured until a GPU runs
//   TileGemm.* (docs/gpu.md). Each tile is written twice (the matmul's
//   buffer and the symmetric window): n x m extra stores, small next to the
//   K-deep reads.
// - The communication kernel holds kTileCommCtas CTAs resident while it
//   waits; the GEMM never waits on it, so the GEMM always progresses on the
//   other SMs. The GEMM is launched first: where kernels run one after the
//   other (CUDA_LAUNCH_BLOCKING=1, tools that serialise launches), a
//   communication kernel launched first would spin on flags of a GEMM that
//   never starts, the host blocked in the launch, out of the watchdog's
//   reach. Its grid leaves kTileCommCtas SMs' worth of room
//   (tile_gemm_grid), so the communication kernel, launched second, still
//   finds room beside the persistent GEMM's CTAs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <nccl.h>
#include <nccl_device.h>

#include <algorithm>
#include <cuda/atomic>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/lsa_comm_impl.cuh"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/tile_gemm.h"
#include "kernels/cuda/vec.cuh"
#include "model/error.h"

namespace coconet::kernels::cuda {

namespace {

using model::DType;
using model::ReduceOp;

// Shared-memory row strides (elements): WMMA needs ldm a multiple of 8 for
// 16-bit types and of 4 for f32, and fragment pointers 32-byte aligned; the
// padding also staggers rows across banks.
constexpr int kAsLd = kTileDepth + 8;
constexpr int kBsLd = kTileCols + 8;
constexpr int kCsLd = kTileCols + 4;
constexpr int kWmma = 16;  // the m16n16k16 fragment
constexpr int kWarp = 32;
// The f32 path: thread t computes rows (t / 8) * 4 .. + 4, columns (t % 8) * 8 .. + 8.
constexpr int kSimtRows = 4;
constexpr int kSimtCols = 8;
static_assert(kTileGemmThreads == 4 * kWarp, "four warps, each a 32 x 32 quarter of the tile");
static_assert((kTileRows / kSimtRows) * (kTileCols / kSimtCols) == kTileGemmThreads,
              "the f32 path covers the tile");
// CTA i of the communication kernel syncs on LSA barrier i, and the device
// communicator holds kFusedCtas of them (lsa_comm.cu, lsaBarrierCount).
static_assert(kTileCommCtas <= kFusedCtas, "one LSA barrier per communication CTA");
// Nanoseconds a waiting thread sleeps between polls of a flag.
constexpr unsigned kSpinSleepNs = 200;

struct TileGemmParams {
  const void* a;
  const void* b;
  void* c;
  void* c_window;
  DType c_dtype;
  std::int64_t n, k, lda, ldb, ldc;
  unsigned* flags;
  int segments;
  int col_tiles;
  int total_tiles;
  TileSegment seg[kMaxTileSegments];
};

template <typename T>
__device__ __forceinline__ T zero() {
  return from_f32<T>(0.0f);
}
template <>
__device__ __forceinline__ float zero<float>() {
  return 0.0f;
}

template <typename T>
struct TileSmem {
  T as[kTileRows][kAsLd];
  T bs[kTileDepth][kBsLd];
  float cs[kTileRows][kCsLd];
};

// A's rows [row0, row0 + kTileRows) of segment s and B's columns [col0, ..)
// at K step k0 into shared memory; outside the matrices: zeros.
template <typename T>
__device__ void load_step(const TileGemmParams& p, const TileSegment& s, std::int64_t row0,
                          std::int64_t col0, std::int64_t k0, TileSmem<T>& sm) {
  const T* a = static_cast<const T*>(p.a) + s.a_offset;
  const T* b = static_cast<const T*>(p.b);
  for (int i = threadIdx.x; i < kTileRows * kTileDepth; i += kTileGemmThreads) {
    const int r = i / kTileDepth, kk = i % kTileDepth;
    const std::int64_t gr = row0 + r, gk = k0 + kk;
    sm.as[r][kk] = gr < s.rows && gk < p.k ? a[gr * p.lda + gk] : zero<T>();
  }
  for (int i = threadIdx.x; i < kTileDepth * kTileCols; i += kTileGemmThreads) {
    const int kk = i / kTileCols, c = i % kTileCols;
    const std::int64_t gk = k0 + kk, gc = col0 + c;
    sm.bs[kk][c] = gk < p.k && gc < p.n ? b[gk * p.ldb + gc] : zero<T>();
  }
}

// The tile's product into sm.cs (f16/bf16: tensor cores).
template <typename T>
__device__ void mma_tile(const TileGemmParams& p, const TileSegment& s, std::int64_t row0,
                         std::int64_t col0, TileSmem<T>& sm) {
  using namespace nvcuda;
  const int warp = threadIdx.x / kWarp;
  const int wm = (warp / 2) * 2 * kWmma, wn = (warp % 2) * 2 * kWmma;
  wmma::fragment<wmma::accumulator, kWmma, kWmma, kWmma, float> acc[2][2];
  for (auto& row : acc)
    for (auto& f : row) wmma::fill_fragment(f, 0.0f);
  for (std::int64_t k0 = 0; k0 < p.k; k0 += kTileDepth) {
    load_step(p, s, row0, col0, k0, sm);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileDepth; kk += kWmma) {
      wmma::fragment<wmma::matrix_a, kWmma, kWmma, kWmma, T, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, T, wmma::row_major> fb[2];
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &sm.as[wm + i * kWmma][kk], kAsLd);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &sm.bs[kk][wn + j * kWmma], kBsLd);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();  // every warp is done with this step's tiles before the next load
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&sm.cs[wm + i * kWmma][wn + j * kWmma], acc[i][j], kCsLd,
                              wmma::mem_row_major);
  __syncthreads();
}

// f32: CUDA cores, f32 fused multiply-adds in K order.
template <>
__device__ void mma_tile<float>(const TileGemmParams& p, const TileSegment& s, std::int64_t row0,
                                std::int64_t col0, TileSmem<float>& sm) {
  const int tr = static_cast<int>(threadIdx.x) / (kTileCols / kSimtCols) * kSimtRows;
  const int tc = static_cast<int>(threadIdx.x) % (kTileCols / kSimtCols) * kSimtCols;
  float acc[kSimtRows][kSimtCols] = {};
  for (std::int64_t k0 = 0; k0 < p.k; k0 += kTileDepth) {
    load_step(p, s, row0, col0, k0, sm);
    __syncthreads();
    for (int kk = 0; kk < kTileDepth; ++kk)
#pragma unroll
      for (int i = 0; i < kSimtRows; ++i)
#pragma unroll
        for (int j = 0; j < kSimtCols; ++j)
          acc[i][j] = fmaf(sm.as[tr + i][kk], sm.bs[kk][tc + j], acc[i][j]);
    __syncthreads();
  }
  for (int i = 0; i < kSimtRows; ++i)
    for (int j = 0; j < kSimtCols; ++j) sm.cs[tr + i][tc + j] = acc[i][j];
  __syncthreads();
}

// sm.cs to C (and the window), inside the segment and the columns only.
__device__ void store_tile(const TileGemmParams& p, const TileSegment& s, std::int64_t row0,
                           std::int64_t col0, const float (&cs)[kTileRows][kCsLd]) {
  for (int i = threadIdx.x; i < kTileRows * kTileCols; i += kTileGemmThreads) {
    const int r = i / kTileCols, c = i % kTileCols;
    const std::int64_t gr = row0 + r, gc = col0 + c;
    if (gr >= s.rows || gc >= p.n) continue;
    const std::int64_t at = s.c_offset + gr * p.ldc + gc;
    store_elem(p.c, p.c_dtype, at, cs[r][c]);
    if (p.c_window != nullptr) store_elem(p.c_window, p.c_dtype, at, cs[r][c]);
  }
}

// Release of the tile's stores on its block's flag (see the design notes).
__device__ void publish(unsigned* flag) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(flag, 1u);
  }
}

template <typename T>
__global__ void __launch_bounds__(kTileGemmThreads)
    tile_gemm_kernel(const __grid_constant__ TileGemmParams p) {
  __shared__ __align__(32) TileSmem<T> sm;
  // Unsigned: every CTA draws one ticket past the last, so the counter ends
  // up to the grid past total_tiles, which may pass INT32_MAX (a signed
  // ticket would wrap negative, pass the test below and index seg[-1]).
  __shared__ unsigned ticket;
  for (;;) {
    if (threadIdx.x == 0) ticket = atomicAdd(p.flags + kMaxTileBlocks, 1u);
    __syncthreads();
    const unsigned t = ticket;
    if (t >= static_cast<unsigned>(p.total_tiles)) return;
    const TileCoord at = tile_at(p.seg, p.segments, p.col_tiles, static_cast<std::int32_t>(t));
    const TileSegment& s = p.seg[at.segment];
    mma_tile<T>(p, s, at.row, at.col, sm);
    store_tile(p, s, at.row, at.col, sm.cs);
    publish(p.flags +
            s.block);  // its __syncthreads also keeps `ticket` until every thread has read it
  }
}

template <typename T>
void launch_gemm(const TileGemmParams& p, cudaStream_t stream) {
  int device = 0, sms = 0;
  COCONET_CUDA_CHECK(cudaGetDevice(&device));
  COCONET_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t resident =
      grid_cap(reinterpret_cast<const void*>(&tile_gemm_kernel<T>), kTileGemmThreads);
  const std::int64_t per_sm = resident / (std::max<std::int64_t>(sms, 1) * kGridWaves);
  const int grid = tile_gemm_grid(p.total_tiles, per_sm, sms);
  tile_gemm_kernel<T><<<grid, kTileGemmThreads, 0, stream>>>(p);
  COCONET_CUDA_CHECK_LAUNCH();
}

struct TileCommParams {
  const unsigned* flags;
  ncclWindow_t window;
  // This rank's window at the address the GEMM stores it through (the
  // buffer's own, not NCCL's LSA mapping of it): the kernel reads its own
  // part through the same virtual address the GEMM wrote, so no proxy
  // fence is needed between two aliases of one memory while both kernels run.
  void* own;
  int own_peer;  // its LSA rank
  void* out;
  DType dtype;
  ReduceOp op;
  bool in_place;
  int blocks;
  int steps;
  int n_peers;
  std::int32_t targets[kMaxTileBlocks];
  int peers[kMaxTilePeers];
  TileStep step[kMaxTileSteps];
};

// Acquire of block b (see the design notes).
__device__ void await_block(const unsigned* flag, unsigned target) {
  ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_device> f(*const_cast<unsigned*>(flag));
  while (f.load(::cuda::memory_order_acquire) < target) __nanosleep(kSpinSleepNs);
}

__device__ __forceinline__ float combine(ReduceOp op, float acc, float x) {
  switch (op) {
    case ReduceOp::max:
      return fmaxf(acc, x);
    case ReduceOp::min:
      return fminf(acc, x);
    case ReduceOp::sum:
    case ReduceOp::mean:
      break;
  }
  return acc + x;
}

__device__ __forceinline__ void* peer_at(const TileCommParams& p, std::int64_t i, int peer) {
  const size_t offset = static_cast<size_t>(i) * storage_bytes(p.dtype);
  if (peer == p.own_peer) return static_cast<char*>(p.own) + offset;
  return ncclGetLsaPointer(p.window, offset, peer);
}

// One step over the grid: element i read from every peer, reduced, stored.
__device__ void reduce_step(const TileCommParams& p, const TileStep& s) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < s.count; i += stride) {
    float acc = load_elem(peer_at(p, s.src + i, p.peers[0]), p.dtype, 0);
    for (int j = 1; j < p.n_peers; ++j)
      acc = combine(p.op, acc, load_elem(peer_at(p, s.src + i, p.peers[j]), p.dtype, 0));
    if (p.op == ReduceOp::mean) acc /= static_cast<float>(p.n_peers);
    if (!p.in_place) {
      store_elem(p.out, p.dtype, s.dst + i, acc);
      continue;
    }
    for (int j = 0; j < p.n_peers; ++j)
      store_elem(peer_at(p, s.dst + i, p.peers[j]), p.dtype, 0, acc);
  }
}

__global__ void __launch_bounds__(kBlockThreads)
    tile_comm_kernel(ncclDevComm dev, const __grid_constant__ TileCommParams p) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dev, ncclTeamTagLsa(), blockIdx.x);
  int step = 0;
  for (int b = 0; b < p.blocks; ++b) {
    if (threadIdx.x == 0) await_block(p.flags + b, static_cast<unsigned>(p.targets[b]));
    __syncthreads();
    bar.sync(ncclCoopCta(), ::cuda::memory_order_acq_rel);  // every peer has written block b
    for (; step < p.steps && p.step[step].block == b; ++step) reduce_step(p, p.step[step]);
  }
  bar.sync(ncclCoopCta(), ::cuda::memory_order_acq_rel);  // every peer's reads and stores are done
}

}  // namespace

void reset_tile_flags(unsigned* flags, cudaStream_t stream) {
  COCONET_CUDA_CHECK(cudaMemsetAsync(flags, 0, sizeof(unsigned) * kTileFlagWords, stream));
}

void validate_tile_gemm(const TileGemmArgs& g, const TileGemmPlan& plan) {
  const std::string where = "tiled GEMM (overlap: tile on the cuda backend)";
  if (plan.total_tiles > 0 && (g.a == nullptr || g.b == nullptr || g.c == nullptr))
    throw UserError(where + ": a null operand");
  if (g.n < 1 || g.k < 1 || g.lda < g.k || g.ldb < g.n || g.ldc < g.n)
    throw UserError(where +
                    ": row strides must hold a row (lda >= k, ldb >= n, ldc >= n) and n, k >= 1");
  if (static_cast<int>(plan.segments.size()) > kMaxTileSegments ||
      static_cast<int>(plan.block_tiles.size()) > kMaxTileBlocks)
    throw UserError(where + ": a plan past the kernel's limits (tile_plan.h)");
}

void tile_gemm(const TileGemmArgs& g, const TileGemmPlan& plan, unsigned* flags,
               cudaStream_t stream) {
  validate_tile_gemm(g, plan);
  if (plan.total_tiles == 0) return;
  TileGemmParams p{};
  p.a = g.a;
  p.b = g.b;
  p.c = g.c;
  p.c_window = g.c_window;
  p.c_dtype = g.c_dtype;
  p.n = g.n;
  p.k = g.k;
  p.lda = g.lda;
  p.ldb = g.ldb;
  p.ldc = g.ldc;
  p.flags = flags;
  p.segments = static_cast<int>(plan.segments.size());
  p.col_tiles = plan.col_tiles;
  p.total_tiles = plan.total_tiles;
  for (std::size_t s = 0; s < plan.segments.size(); ++s) p.seg[s] = plan.segments[s];
  switch (g.ab_dtype) {
    case DType::f16:
      return launch_gemm<__half>(p, stream);
    case DType::bf16:
      return launch_gemm<__nv_bfloat16>(p, stream);
    case DType::f32:
      return launch_gemm<float>(p, stream);
  }
}

void tile_comm(const LsaComm& lsa, const TileCommPlan& comm, const TileGemmPlan& gemm,
               const unsigned* flags, const SymmetricBuffer& window, void* out, ReduceOp op,
               bool in_place, cudaStream_t stream) {
  const std::string where = "tile communication kernel";
  if (static_cast<int>(comm.peers.size()) != lsa.lsa_size())
    throw UserError(where + ": a plan for " + std::to_string(comm.peers.size()) +
                    " ranks on an LSA team of " + std::to_string(lsa.lsa_size()));
  if (comm.blocks != static_cast<int>(gemm.block_tiles.size()))
    throw UserError(where + ": the communication plan and the GEMM's differ in blocks");
  if (!in_place && out == nullptr && !comm.steps.empty())
    throw UserError(where + ": a reduce-scatter with no output");
  TileCommParams p{};
  p.flags = flags;
  p.window = window.window();
  p.own = window.view().data;
  p.own_peer = lsa.lsa_rank();
  p.out = out;
  p.dtype = window.view().dtype;
  p.op = op;
  p.in_place = in_place;
  p.blocks = comm.blocks;
  p.steps = static_cast<int>(comm.steps.size());
  p.n_peers = static_cast<int>(comm.peers.size());
  for (int b = 0; b < comm.blocks; ++b)
    p.targets[b] = gemm.block_tiles[static_cast<std::size_t>(b)];
  for (std::size_t q = 0; q < comm.peers.size(); ++q) p.peers[q] = comm.peers[q];
  for (std::size_t s = 0; s < comm.steps.size(); ++s) p.step[s] = comm.steps[s];
  tile_comm_kernel<<<kTileCommCtas, kBlockThreads, 0, stream>>>(lsa.impl().dev, p);
  COCONET_CUDA_CHECK_LAUNCH();
}

}  // namespace coconet::kernels::cuda
