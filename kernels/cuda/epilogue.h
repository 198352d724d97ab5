// The model-parallel epilogue of the Megatron blocks as one kernel:
// out = dropout(z + bias, p) + residual, over rows x cols row-major tensors,
// bias broadcast along rows. Dropout is model/ops.h's, keyed by (seed,
// global element index), so this rank's rows draw the same mask as the whole
// tensor would on the CPU: element (i, j) has global index
// (first_row + i) * cols + j.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/view.h"

namespace coconet::kernels::cuda {

struct EpilogueArgs {
  DeviceView z;         // rows x cols
  DeviceView bias;      // cols
  DeviceView residual;  // rows x cols
  DeviceView out;       // rows x cols (may alias z)
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t first_row = 0;  // global row of this view's row 0
  float p = 0.0f;              // drop probability
  std::uint64_t seed = 0;
};

// Throws UserError on mismatched sizes or storage types (all four share one).
void validate(const EpilogueArgs& a);
void bias_dropout_residual(const EpilogueArgs& a, cudaStream_t stream);

}  // namespace coconet::kernels::cuda
