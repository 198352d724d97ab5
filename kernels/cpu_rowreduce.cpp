// Row reduction on the cpu: each row is widened to f32 a tile at a time
// (kernels/cpu_elementwise.h's load_f32) and folded in row order, so the
// result equals the reference interpreter's for integer-valued inputs and
// differs from it only by f32 rounding of the stored values otherwise.
#include "kernels/cpu_rowreduce.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu_elementwise.h"
#include "model/error.h"
#include "model/ops.h"

namespace coconet::kernels {
namespace {

// Elements widened at a time: 16 KiB of f32, within L1 with the row's next tile.
constexpr std::int64_t kRowTile = 4096;

}  // namespace

void cpu_row_reduce(const CpuRun& in, const CpuRun& out, std::int64_t inner, model::ReduceOp op) {
  COCONET_ASSERT(op == model::ReduceOp::sum || op == model::ReduceOp::max,
                 "row reduction: sum or max");
  COCONET_ASSERT(inner >= 0 && in.count == out.count * inner,
                 "row reduction: input is not out.count rows");
  const bool max = op == model::ReduceOp::max;
  std::vector<float> tile(
      static_cast<std::size_t>(std::min(std::max<std::int64_t>(inner, 1), kRowTile)));
  std::vector<float> result(static_cast<std::size_t>(out.count));
  for (std::int64_t i = 0; i < out.count; ++i) {
    double sum = 0.0;
    float most = -std::numeric_limits<float>::infinity();
    for (std::int64_t k0 = 0; k0 < inner; k0 += kRowTile) {
      const std::int64_t n = std::min(kRowTile, inner - k0);
      load_f32(in.data, in.dtype, in.first + i * inner + k0, 1, n, tile.data());
      if (max)
        for (std::int64_t k = 0; k < n; ++k)  // max as the interpreter's (model::apply_binary)
          most = model::apply_binary(model::BinaryOp::max, most, tile[static_cast<std::size_t>(k)]);
      else
        for (std::int64_t k = 0; k < n; ++k) sum += tile[static_cast<std::size_t>(k)];
    }
    result[static_cast<std::size_t>(i)] = max ? most : static_cast<float>(sum);
  }
  store_f32(out.data, out.dtype, out.first, 1, out.count, result.data());
}

}  // namespace coconet::kernels
