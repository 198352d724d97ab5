// Matmul through the f32 GEMM of kernels/cpu_gemm.h: f32 operands are read
// in place, 16-bit ones widened into f32 scratch first (exact, converted in
// blocks: kernels/cpu_convert.cpp); an f32 output is written in place, any
// other rounded once from an f32 product. The scratch stays allocated per
// thread for the next product (at most the largest operands seen).
#include "kernels/cpu_matmul.h"

#include <vector>

#include "kernels/cpu_elementwise.h"
#include "kernels/cpu_gemm.h"
#include "model/error.h"

namespace coconet::kernels {
namespace {

// An operand as f32 rows: in place when stored as f32, else widened into `scratch`.
struct F32View {
  const float* data = nullptr;
  std::int64_t stride = 0;
};

F32View as_f32(const CpuMatrix& m, std::vector<float>& scratch) {
  if (m.dtype == model::DType::f32) return {reinterpret_cast<const float*>(m.data) + m.first, m.stride};
  scratch.resize(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r)
    load_f32(m.data, m.dtype, m.first + r * m.stride, 1, m.cols, scratch.data() + r * m.cols);
  return {scratch.data(), m.cols};
}

}  // namespace

namespace {

// out = a * b, b already f32 rows.
void multiply(const CpuMatrix& a, F32View vb, std::int64_t b_cols, const CpuMatrix& out) {
  COCONET_ASSERT(out.rows == a.rows && out.cols == b_cols, "matmul shapes do not agree");
  if (out.rows == 0 || out.cols == 0) return;
  // Scratch kept per thread and only grown: a fresh buffer per product
  // costs its page faults and zeroing each call (measured: 4x the time of an
  // f16 GEMM of [256, 3072] x [3072, 3072]).
  thread_local std::vector<float> wide_a, product;
  const F32View va = as_f32(a, wide_a);
  GemmF32 g{va.data, va.stride, vb.data, vb.stride, nullptr, 0, out.rows, out.cols, a.cols};
  if (out.dtype == model::DType::f32) {
    g.c = reinterpret_cast<float*>(out.data) + out.first;
    g.ldc = out.stride;
    gemm_f32(g);
    return;
  }
  product.resize(static_cast<std::size_t>(out.rows * out.cols));
  g.c = product.data();
  g.ldc = out.cols;
  gemm_f32(g);
  for (std::int64_t r = 0; r < out.rows; ++r)
    store_f32(out.data, out.dtype, out.first + r * out.stride, 1, out.cols, product.data() + r * out.cols);
}

}  // namespace

CpuF32Operand::CpuF32Operand(const CpuMatrix& m, std::vector<float>& scratch) : m_(m) {
  const F32View v = as_f32(m, scratch);
  data_ = v.data;
  stride_ = v.stride;
}

void cpu_matmul(const CpuMatrix& a, const CpuF32Operand& b, const CpuMatrix& out) {
  COCONET_ASSERT(a.cols == b.matrix().rows, "matmul shapes do not agree");
  multiply(a, {b.data(), b.stride()}, b.matrix().cols, out);
}

void cpu_matmul(const CpuMatrix& a, const CpuMatrix& b, const CpuMatrix& out) {
  COCONET_ASSERT(a.cols == b.rows && out.rows == a.rows && out.cols == b.cols,
                 "matmul shapes do not agree");
  if (out.rows == 0 || out.cols == 0) return;
  thread_local std::vector<float> wide_b;
  multiply(a, as_f32(b, wide_b), b.cols, out);
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
