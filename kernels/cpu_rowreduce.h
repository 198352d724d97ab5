// CPU row reduction for the cpu backend (rowsum, rowmax): `rows` rows of
// `inner` contiguous elements in any storage type, each reduced to one value,
// sums accumulated in double and maxima in f32 (exact widenings of the
// stored values), rounded (RNE) to the output type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/program.h"
#include "model/types.h"

namespace coconet::kernels {

// A contiguous run of elements of one buffer: `count` elements from element `first`.
struct CpuRun {
  std::byte* data = nullptr;
  model::DType dtype = model::DType::f32;
  std::int64_t first = 0;
  std::int64_t count = 0;
};

// out[i] = op over in[i*inner .. (i+1)*inner) for i < out.count (op: sum or
// max; an empty row gives 0 or -inf). in.count must be out.count * inner.
void cpu_row_reduce(const CpuRun& in, const CpuRun& out, std::int64_t inner, model::ReduceOp op);

}  // namespace coconet::kernels
