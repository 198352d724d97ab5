// The fused allreduce of an optimizer step, fuse(RS-C-AG): reduce-scatter the
// gradients, update this rank's shard (Adam), allgather the new weights.
//
// Two paths, one result:
// - lsa: one kernel through NCCL's device API. Gradients and weights live in
//   symmetric memory windows (ncclMemAlloc + ncclCommWindowRegister); each
//   rank reads its shard of every peer's gradient with LSA loads, sums in
//   f32, updates m, v, w in registers and stores the new weights straight
//   into every peer's window (LSA stores), with an LSA barrier on entry and
//   exit. Needs every rank of the communicator in one LSA team (one NVLink
//   domain) and a communicator that supports symmetric memory.
// - host: ncclReduceScatter, the fused Adam kernel, ncclAllGather on one
//   stream (collectives.h handles ragged shards). Works everywhere.
// choose_fused_path picks; make_lsa_comm reports why the lsa path is not
// available so callers can fall back and say so.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/view.h"

namespace coconet::kernels::cuda {

enum class FusedPath { lsa, host };
[[nodiscard]] std::string to_string(FusedPath p);

// lsa when all `group_ranks` ranks are load/store accessible to each other
// and the device communicator could be made; host otherwise.
[[nodiscard]] FusedPath choose_fused_path(int group_ranks, int lsa_ranks, bool device_comm_ok);

// The LSA kernels inline the device structures of the NCCL headers they are
// built with (nccl_device/*.h: ncclDevComm, the LSA barrier and window
// layouts), which NCCL changes between minor versions. Whether NCCL at run
// time (ncclGetVersion's code) is the headers' major.minor; if not, `why`
// says so and the callers take the host path.
[[nodiscard]] bool lsa_version_matches(int runtime_code, int header_code, std::string& why);
// The same for this process's NCCL (ncclGetVersion against NCCL_VERSION_CODE).
[[nodiscard]] bool lsa_runtime_supported(std::string& why);

// A symmetric window needs the same size on every rank of the communicator
// (NCCL_WIN_COLL_SYMMETRIC registers one window across them). Given each
// rank's bytes, throws UserError naming the first rank that differs from rank 0.
void check_symmetric_sizes(const std::vector<std::int64_t>& bytes_by_rank);

// CTAs of the fused kernel, and LSA barriers it needs (one per CTA): one CTA
// per SM of an H100/H200 SXM (132 SMs), rounded down to a power of two.
inline constexpr int kFusedCtas = 128;

// Device memory every rank of `comm` allocates with the same size and
// registers as a symmetric window (collective over comm).
class SymmetricBuffer {
 public:
  SymmetricBuffer(ncclComm_t comm, model::DType dtype, std::int64_t count);
  ~SymmetricBuffer();
  SymmetricBuffer(const SymmetricBuffer&) = delete;
  SymmetricBuffer& operator=(const SymmetricBuffer&) = delete;
  [[nodiscard]] DeviceView view() const { return {data_, count_, dtype_}; }
  [[nodiscard]] ncclWindow_t window() const { return window_; }

 private:
  ncclComm_t comm_ = nullptr;
  void* data_ = nullptr;
  std::int64_t count_ = 0;
  model::DType dtype_ = model::DType::f32;
  ncclWindow_t window_ = nullptr;
};

// A device communicator (ncclDevCommCreate) with kFusedCtas LSA barriers.
class LsaComm {
 public:
  explicit LsaComm(ncclComm_t comm);
  ~LsaComm();
  LsaComm(const LsaComm&) = delete;
  LsaComm& operator=(const LsaComm&) = delete;
  struct Impl;
  [[nodiscard]] const Impl& impl() const { return *impl_; }
  [[nodiscard]] int lsa_size() const;
  [[nodiscard]] int lsa_rank() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// The LSA team size of `comm` as NCCL sees it (host query).
[[nodiscard]] int lsa_team_size(ncclComm_t comm);

// Tries to make an LsaComm; on failure returns nullptr and says why in `why`.
[[nodiscard]] std::unique_ptr<LsaComm> make_lsa_comm(ncclComm_t comm, std::string& why);

// The step's tensors: full gradient and weights (N elements each), this
// rank's shard of the moments (as_slice: they never leave their shard).
struct FusedAdamArgs {
  DeviceView g;
  DeviceView w;
  DeviceView m;
  DeviceView v;
  AdamHyper h;
};

// One kernel; g and w must be the views of `g_buf` and `w_buf`.
void fused_adam_lsa(const LsaComm& comm, const SymmetricBuffer& g_buf,
                    const SymmetricBuffer& w_buf, const FusedAdamArgs& a, cudaStream_t stream);
// Reduce-scatter + fused Adam + allgather with host-API NCCL; `g_shard` is
// scratch for the reduced gradient shard (shard-sized, g's dtype).
void fused_adam_host(ncclComm_t comm, int rank, int ranks, const FusedAdamArgs& a,
                     DeviceView g_shard, cudaStream_t stream);

}  // namespace coconet::kernels::cuda
