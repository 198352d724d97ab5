// The row reductions rowsum and rowmax on the device: `rows` rows of `inner`
// contiguous elements, each reduced to one value (sums in f32 per lane then
// across the warp, maxima in f32), rounded to the output's storage type.
// Host-only declarations: the backend calls these without CUDA headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/view.h"
#include "model/program.h"

namespace coconet::kernels::cuda {

// out[i] = op over in[i*inner .. (i+1)*inner) for i < out.size (op: sum or
// max; an empty row gives 0 or -inf). in.size must be out.size * inner.
void row_reduce(const DeviceView& in, const DeviceView& out, std::int64_t inner, model::ReduceOp op,
                cudaStream_t stream);

}  // namespace coconet::kernels::cuda
