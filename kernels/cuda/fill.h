// Input generation on the device: fills a tensor block with the run's
// deterministic input values (model/input_pattern.h, the interpreter's own
// definition) where the buffer lives, so a 1 G-element workload is ready in
// the time of one write over HBM instead of a host loop and a PCIe upload.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/view.h"
#include "model/input_pattern.h"

namespace coconet::kernels::cuda {

// dst.data[i] = input_at(pattern, i) for i < dst.size, rounded to dst.dtype
// (small integers times a power of two: exact in f16, bf16 and f32); queued on `stream`.
void fill_input(const DeviceView& dst, const model::InputPattern& pattern, cudaStream_t stream);

}  // namespace coconet::kernels::cuda
