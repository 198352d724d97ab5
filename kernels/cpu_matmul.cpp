// Matmul through Eigen's GEMM in f32: f32 operands are mapped in place, 16-bit
// ones are widened into f32 scratch first (exact), the product is rounded once
// to the output type.
#include "kernels/cpu_matmul.h"

#include <Eigen/Core>

#include "kernels/cpu_elementwise.h"
#include "model/error.h"

namespace coconet::kernels {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutableMap = Eigen::Map<RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;

RowMajor widen(const CpuMatrix& m) {
  RowMajor out(m.rows, m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r)
    load_f32(m.data, m.dtype, m.first + r * m.stride, 1, m.cols, out.data() + r * m.cols);
  return out;
}

}  // namespace

void cpu_matmul(const CpuMatrix& a, const CpuMatrix& b, const CpuMatrix& out) {
  COCONET_ASSERT(a.cols == b.rows && out.rows == a.rows && out.cols == b.cols,
                 "matmul shapes do not agree");
  if (out.rows == 0 || out.cols == 0) return;
  const bool f32_in = a.dtype == model::DType::f32 && b.dtype == model::DType::f32;
  RowMajor product;
  if (f32_in) {
    const float* pa = reinterpret_cast<const float*>(a.data) + a.first;
    const float* pb = reinterpret_cast<const float*>(b.data) + b.first;
    product.noalias() = ConstMap(pa, a.rows, a.cols, Eigen::OuterStride<>(a.stride)) *
                        ConstMap(pb, b.rows, b.cols, Eigen::OuterStride<>(b.stride));
  } else {
    product.noalias() = widen(a) * widen(b);
  }
  for (std::int64_t r = 0; r < out.rows; ++r)
    store_f32(out.data, out.dtype, out.first + r * out.stride, 1, out.cols, product.data() + r * out.cols);
}

void cpu_matmul_batched(const CpuMatrix& a, const CpuMatrix& b, const CpuMatrix& out, std::int64_t batch,
                        const BatchStrides& strides) {
  for (std::int64_t q = 0; q < batch; ++q) {
    CpuMatrix aq = a, bq = b, oq = out;
    aq.first += q * strides.a;
    bq.first += q * strides.b;
    oq.first += q * strides.out;
    cpu_matmul(aq, bq, oq);
  }
}

}  // namespace coconet::kernels
