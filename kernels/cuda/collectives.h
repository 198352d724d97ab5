// Host-API NCCL collectives over ragged, scattered parts: the reduce-scatter
// and allgather of coconet's slices (the first n % P ranks hold one element
// more), which NCCL's ncclReduceScatter / ncclAllGather cannot express
// directly. Uniform contiguous parts take the single NCCL call; anything else
// becomes one grouped ncclReduce / ncclBroadcast per position (same bytes on
// the wire per rank, one launch through ncclGroupStart/End).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <span>

#include "model/program.h"

namespace coconet::kernels::cuda {

// ncclGroupStart on construction, ncclGroupEnd by end() (checked) or, when an
// exception leaves the scope before it, by the destructor (its result
// ignored): a throw between the two must not leave the thread inside a group,
// where every later NCCL call would be deferred. The functions are
// parameters so that a host test can count the calls.
class NcclGroup {
 public:
  using Call = ncclResult_t (*)();
  explicit NcclGroup(Call start = ncclGroupStart, Call end = ncclGroupEnd);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end();  // ncclGroupEnd, checked; once

 private:
  Call end_;
  bool open_ = true;
};

// A contiguous run of device elements.
struct Part {
  void* data = nullptr;
  std::int64_t count = 0;
};

[[nodiscard]] ncclDataType_t nccl_type(model::DType t);
[[nodiscard]] ncclRedOp_t nccl_op(model::ReduceOp op);

// True when the parts are equal in count and lie back to back in memory, in
// position order (so one ncclReduceScatter / ncclAllGather covers them).
[[nodiscard]] bool uniform_contiguous(std::span<const Part> parts, int elem_bytes);

// out = reduction over the group of parts[position] (see exec/backend.h).
void reduce_scatter(ncclComm_t comm, std::span<const Part> parts, Part out, model::DType t,
                    model::ReduceOp op, int position, cudaStream_t stream);
// parts[r] = position r's `in` on every rank.
void allgather(ncclComm_t comm, Part in, std::span<const Part> parts, model::DType t, int position,
               cudaStream_t stream);

}  // namespace coconet::kernels::cuda
