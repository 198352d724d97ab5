// An all-to-all over host-API NCCL for alltoall(x, d): each rank sends every
// position r a strided 2-D block of its input and receives one from each into
// its output. Blocks are packed into contiguous scratch with
// cudaMemcpy2DAsync, exchanged as grouped ncclSend / ncclRecv (one launch
// through ncclGroupStart/End), then unpacked; a rank's block for itself is
// packed and unpacked like the others, without a send. Ragged and empty
// blocks are fine.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <span>

#include "model/types.h"

namespace coconet::kernels::cuda {

// rows x cols device elements, row i at data + i * stride elements.
struct StridedBlock {
  void* data = nullptr;
  std::int64_t rows = 0, cols = 0, stride = 0;
  [[nodiscard]] std::int64_t count() const { return rows * cols; }
};

// Scratch bytes alltoall needs for these blocks (both packings together).
[[nodiscard]] std::size_t alltoall_scratch_bytes(std::span<const StridedBlock> send, std::span<const StridedBlock> recv,
                                                 model::DType t);

// send[r] to position r, recv[r] from position r, on `stream`; `scratch` holds
// at least alltoall_scratch_bytes and is not touched by other streams meanwhile.
void alltoall(ncclComm_t comm, std::span<const StridedBlock> send, std::span<const StridedBlock> recv, model::DType t,
              int position, void* scratch, cudaStream_t stream);

}  // namespace coconet::kernels::cuda
