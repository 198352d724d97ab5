// Ragged reduce-scatter and allgather over host-API NCCL (see collectives.h).
#include "kernels/cuda/collectives.h"

#include "kernels/cuda/check.h"
#include "kernels/cuda/view.h"
#include "model/error.h"

namespace coconet::kernels::cuda {

NcclGroup::NcclGroup(Call start, Call end) : end_(end) { COCONET_NCCL_CHECK(start()); }

NcclGroup::~NcclGroup() {
  if (open_) (void)end_();
}

void NcclGroup::end() {
  open_ = false;
  COCONET_NCCL_CHECK(end_());
}

ncclDataType_t nccl_type(model::DType t) {
  switch (t) {
    case model::DType::f16: return ncclFloat16;
    case model::DType::bf16: return ncclBfloat16;
    case model::DType::f32: break;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(model::ReduceOp op) {
  switch (op) {
    case model::ReduceOp::sum: return ncclSum;
    case model::ReduceOp::max: return ncclMax;
    case model::ReduceOp::min: return ncclMin;
    case model::ReduceOp::mean: return ncclAvg;  // NCCL 2.10+: the sum over the ranks divided by their count
  }
  return ncclSum;
}

bool uniform_contiguous(std::span<const Part> parts, int elem_bytes) {
  if (parts.empty()) return false;
  const auto* base = static_cast<const char*>(parts[0].data);
  for (std::size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].count != parts[0].count) return false;
    const auto expected = base + static_cast<std::int64_t>(r) * parts[0].count * elem_bytes;
    if (static_cast<const char*>(parts[r].data) != expected) return false;
  }
  return true;
}

void reduce_scatter(ncclComm_t comm, std::span<const Part> parts, Part out, model::DType t,
                    model::ReduceOp op, int position, cudaStream_t stream) {
  if (parts[position].count != out.count)
    throw InternalError("reduce_scatter: my part and the output differ in size");
  if (uniform_contiguous(parts, storage_bytes(t))) {
    COCONET_NCCL_CHECK(ncclReduceScatter(parts[0].data, out.data, static_cast<size_t>(out.count),
                                         nccl_type(t), nccl_op(op), comm, stream));
    return;
  }
  NcclGroup group;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].count == 0) continue;
    void* recv = out.data;  // read by NCCL on the root (r) only
    COCONET_NCCL_CHECK(ncclReduce(parts[r].data, recv, static_cast<size_t>(parts[r].count),
                                  nccl_type(t), nccl_op(op), static_cast<int>(r), comm, stream));
  }
  group.end();
}

void allgather(ncclComm_t comm, Part in, std::span<const Part> parts, model::DType t, int position,
               cudaStream_t stream) {
  if (parts[position].count != in.count)
    throw InternalError("allgather: my part and the input differ in size");
  if (uniform_contiguous(parts, storage_bytes(t))) {
    COCONET_NCCL_CHECK(ncclAllGather(in.data, parts[0].data, static_cast<size_t>(in.count),
                                     nccl_type(t), comm, stream));
    return;
  }
  NcclGroup group;
  for (std::size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].count == 0) continue;
    const void* send = static_cast<int>(r) == position ? in.data : parts[r].data;
    COCONET_NCCL_CHECK(ncclBroadcast(send, parts[r].data, static_cast<size_t>(parts[r].count),
                                     nccl_type(t), static_cast<int>(r), comm, stream));
  }
  group.end();
}

}  // namespace coconet::kernels::cuda
