// The norm statement, norm(x) = sqrt(sum of x^2), as a reduction phase: the
// sum of squares lands in a device double (so the backend can allreduce it
// across the group for a sliced tensor), then one thread takes the root.
// Deterministic: fixed grid, partials added in block order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/cuda/grid.h"
#include "kernels/cuda/view.h"

namespace coconet::kernels::cuda {

// Doubles of workspace sum_of_squares needs: the sum, then per-block partials.
inline constexpr std::size_t kNormWorkspaceDoubles = 1 + kReductionBlocks;

// workspace[0] = sum of in[i]^2 (squares in f32, sums in double).
void sum_of_squares(const DeviceView& in, double* workspace, cudaStream_t stream);
// out[0] = sqrt(*sum), rounded to out's storage type.
void sqrt_into(const double* sum, const DeviceView& out, cudaStream_t stream);

}  // namespace coconet::kernels::cuda
