// SymmetricBuffer, LsaComm and the LSA path's checks (lsa_comm.h).
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/lsa_comm.h"
#include "kernels/cuda/lsa_comm_impl.cuh"

namespace coconet::kernels::cuda {

namespace {

// A window's bytes: NCCL registers whole multiples of its alignment.
std::size_t window_bytes(model::DType t, std::int64_t count) {
  const std::size_t bytes = static_cast<std::size_t>(count) * storage_bytes(t);
  const std::size_t a = NCCL_WIN_REQUIRED_ALIGNMENT;
  return std::max<std::size_t>(a, (bytes + a - 1) / a * a);
}

}  // namespace

std::string to_string(FusedPath p) { return p == FusedPath::lsa ? "lsa" : "host"; }

FusedPath choose_fused_path(int group_ranks, int lsa_ranks, bool device_comm_ok) {
  return group_ranks >= 1 && lsa_ranks == group_ranks && device_comm_ok ? FusedPath::lsa
                                                                         : FusedPath::host;
}

bool lsa_version_matches(int runtime_code, int header_code, std::string& why) {
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9 (nccl.h).
  const auto name = [](int code) { return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100); };
  if (runtime_code / 100 == header_code / 100) return true;
  why = "NCCL " + name(runtime_code) + " at run time, but the LSA kernels inline NCCL " + name(header_code) +
        "'s device structures (built with its headers)";
  return false;
}

bool lsa_runtime_supported(std::string& why) {
  int version = 0;
  COCONET_NCCL_CHECK(ncclGetVersion(&version));
  return lsa_version_matches(version, NCCL_VERSION_CODE, why);
}

void check_symmetric_sizes(const std::vector<std::int64_t>& bytes_by_rank) {
  for (std::size_t r = 1; r < bytes_by_rank.size(); ++r)
    if (bytes_by_rank[r] != bytes_by_rank[0])
      throw UserError("symmetric window: rank " + std::to_string(r) + " registers " +
                      std::to_string(bytes_by_rank[r]) + " bytes, rank 0 " + std::to_string(bytes_by_rank[0]) +
                      "; every rank of the communicator must register the same size (the same fused op "
                      "at the same sizes on every rank)");
}

namespace {

// Every rank's window size, gathered over `comm` (a blocking NCCL allgather
// of one int64 on a stream of its own), checked equal before registering.
void require_symmetric(ncclComm_t comm, std::size_t bytes) {
  int ranks = 1;
  COCONET_NCCL_CHECK(ncclCommCount(comm, &ranks));
  if (ranks == 1) return;
  std::int64_t* device = nullptr;
  cudaStream_t stream = nullptr;
  COCONET_CUDA_CHECK(cudaMalloc(&device, sizeof(std::int64_t) * static_cast<std::size_t>(ranks + 1)));
  std::vector<std::int64_t> all(static_cast<std::size_t>(ranks));
  try {
    COCONET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const auto mine = static_cast<std::int64_t>(bytes);
    COCONET_CUDA_CHECK(cudaMemcpyAsync(device + ranks, &mine, sizeof(mine), cudaMemcpyHostToDevice, stream));
    COCONET_NCCL_CHECK(ncclAllGather(device + ranks, device, 1, ncclInt64, comm, stream));
    COCONET_CUDA_CHECK(cudaMemcpyAsync(all.data(), device, sizeof(std::int64_t) * all.size(), cudaMemcpyDeviceToHost,
                                       stream));
    COCONET_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    (void)cudaFree(device);
    throw;
  }
  (void)cudaStreamDestroy(stream);
  (void)cudaFree(device);
  check_symmetric_sizes(all);
}

}  // namespace

SymmetricBuffer::SymmetricBuffer(ncclComm_t comm, model::DType dtype, std::int64_t count)
    : comm_(comm), count_(count), dtype_(dtype) {
  const std::size_t bytes = window_bytes(dtype, count);
  require_symmetric(comm, bytes);
  COCONET_NCCL_CHECK(ncclMemAlloc(&data_, bytes));
  try {
    COCONET_CUDA_CHECK(cudaMemset(data_, 0, bytes));
    COCONET_NCCL_CHECK(ncclCommWindowRegister(comm, data_, bytes, &window_, NCCL_WIN_COLL_SYMMETRIC));
  } catch (...) {  // the destructor does not run for a constructor that throws
    (void)ncclMemFree(data_);
    throw;
  }
}

SymmetricBuffer::~SymmetricBuffer() {
  if (window_ != nullptr) (void)ncclCommWindowDeregister(comm_, window_);
  if (data_ != nullptr) (void)ncclMemFree(data_);
}

LsaComm::LsaComm(ncclComm_t comm) : impl_(std::make_unique<Impl>()) {
  impl_->comm = comm;
  // The requirements struct gained versioning fields in NCCL 2.29, which must
  // be set by its initializer macro (a zeroed struct is rejected there);
  // 2.28 has no such macro and takes a zeroed struct.
#if defined(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER)
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#elif NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
#error "NCCL 2.29+ without NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER: check how nccl_device/core.h initialises ncclDevCommRequirements"
#else
  ncclDevCommRequirements reqs{};
#endif
  reqs.lsaBarrierCount = kFusedCtas;
  COCONET_NCCL_CHECK(ncclDevCommCreate(comm, &reqs, &impl_->dev));
}

LsaComm::~LsaComm() { (void)ncclDevCommDestroy(impl_->comm, &impl_->dev); }

int LsaComm::lsa_size() const { return impl_->dev.lsaSize; }
int LsaComm::lsa_rank() const { return impl_->dev.lsaRank; }

int lsa_team_size(ncclComm_t comm) { return ncclTeamLsa(comm).nRanks; }

std::unique_ptr<LsaComm> make_lsa_comm(ncclComm_t comm, std::string& why) {
  if (!lsa_runtime_supported(why)) return nullptr;
  int ranks = 0;
  COCONET_NCCL_CHECK(ncclCommCount(comm, &ranks));
  const int lsa = lsa_team_size(comm);
  if (lsa != ranks) {
    why = "only " + std::to_string(lsa) + " of " + std::to_string(ranks) +
          " ranks share a load/store (NVLink) domain";
    return nullptr;
  }
  try {
    return std::make_unique<LsaComm>(comm);
  } catch (const DeviceError& e) {
    why = std::string("the device communicator could not be made: ") + e.what();
    return nullptr;
  }
}

}  // namespace coconet::kernels::cuda
