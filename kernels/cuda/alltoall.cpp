// Packed all-to-all over grouped NCCL sends and receives (see alltoall.h).
#include "kernels/cuda/alltoall.h"

#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/collectives.h"
#include "kernels/cuda/view.h"

namespace coconet::kernels::cuda {
namespace {

std::size_t bytes_of(const StridedBlock& b, std::size_t width) { return static_cast<std::size_t>(b.count()) * width; }

// StridedBlock `b` to or from the contiguous bytes at `flat`.
void copy_block(const StridedBlock& b, void* flat, std::size_t width, bool pack, cudaStream_t stream) {
  if (b.count() == 0) return;
  const std::size_t row = static_cast<std::size_t>(b.cols) * width;
  const std::size_t pitch = static_cast<std::size_t>(b.stride) * width;
  const auto rows = static_cast<std::size_t>(b.rows);
  if (pack)
    COCONET_CUDA_CHECK(cudaMemcpy2DAsync(flat, row, b.data, pitch, row, rows, cudaMemcpyDeviceToDevice, stream));
  else
    COCONET_CUDA_CHECK(cudaMemcpy2DAsync(b.data, pitch, flat, row, row, rows, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

std::size_t alltoall_scratch_bytes(std::span<const StridedBlock> send, std::span<const StridedBlock> recv, model::DType t) {
  const std::size_t width = storage_bytes(t);
  std::size_t total = 0;
  for (const StridedBlock& b : send) total += bytes_of(b, width);
  for (const StridedBlock& b : recv) total += bytes_of(b, width);
  return total;
}

void alltoall(ncclComm_t comm, std::span<const StridedBlock> send, std::span<const StridedBlock> recv, model::DType t,
              int position, void* scratch, cudaStream_t stream) {
  const std::size_t width = storage_bytes(t);
  const auto p = send.size();
  std::vector<char*> out(p), in(p);
  char* at = static_cast<char*>(scratch);
  for (std::size_t r = 0; r < p; ++r) {
    out[r] = at;
    at += bytes_of(send[r], width);
  }
  for (std::size_t r = 0; r < p; ++r) {
    in[r] = at;
    at += bytes_of(recv[r], width);
  }
  const auto me = static_cast<std::size_t>(position);
  for (std::size_t r = 0; r < p; ++r)
    if (r != me) copy_block(send[r], out[r], width, true, stream);
  NcclGroup group;
  for (std::size_t r = 0; r < p; ++r) {
    if (r == me) continue;
    if (send[r].count() > 0)
      COCONET_NCCL_CHECK(ncclSend(out[r], static_cast<std::size_t>(send[r].count()), nccl_type(t), static_cast<int>(r),
                                  comm, stream));
    if (recv[r].count() > 0)
      COCONET_NCCL_CHECK(ncclRecv(in[r], static_cast<std::size_t>(recv[r].count()), nccl_type(t), static_cast<int>(r),
                                  comm, stream));
  }
  group.end();
  // My own block: packed, then unpacked into place (the two may differ in stride).
  copy_block(send[me], out[me], width, true, stream);
  for (std::size_t r = 0; r < p; ++r) copy_block(recv[r], r == me ? out[me] : in[r], width, false, stream);
}

}  // namespace coconet::kernels::cuda
