// The pieces every single-kernel collective through NCCL's device API (LSA:
// load/store access across one NVLink domain) shares: symmetric memory
// windows (SymmetricBuffer: ncclMemAlloc + ncclCommWindowRegister, the same
// size on every rank), the device communicator with its LSA barriers
// (LsaComm: ncclDevCommCreate), the check that NCCL at run time has the
// device structures the kernels were built with, and the choice between the
// LSA path and the host-API one (choose_fused_path; make_lsa_comm says why
// the LSA path is not available so callers can fall back and say so). The
// cuda backend's fused calls (fused_program_lsa.h) are built on them.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

}  // namespace coconet::kernels::cuda
