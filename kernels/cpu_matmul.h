// CPU matrix multiply for the cpu backend: row-major strided matrices in any
// storage type, multiplied in f32 through Eigen, rounded to the output type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/types.h"

namespace coconet::kernels {

// A row-major matrix view: rows x cols starting at element `first` of `data`,
// `stride` elements between rows.
struct CpuMatrix {
  std::byte* data = nullptr;
  model::DType dtype = model::DType::f32;
  std::int64_t first = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t stride = 0;
};

// out = a * b (a: m x k, b: k x n, out: m x n).
void cpu_matmul(const CpuMatrix& a, const CpuMatrix& b, const CpuMatrix& out);

// A right operand as f32 rows, widened once (when it is not f32 already) for
// every product that shares it: the blocks of a tiled GEMM read one weight,
// where per-call products widen it per call. The widened copy lives in
// `scratch` (kept by the caller and only grown: a fresh buffer per GEMM
// pays its page faults every step).
class CpuF32Operand {
 public:
  CpuF32Operand(const CpuMatrix& m, std::vector<float>& scratch);
  [[nodiscard]] const CpuMatrix& matrix() const { return m_; }
  [[nodiscard]] const float* data() const { return data_; }
  [[nodiscard]] std::int64_t stride() const { return stride_; }

 private:
  CpuMatrix m_;
  const float* data_ = nullptr;
  std::int64_t stride_ = 0;
};

// out = a * b with b widened already.
void cpu_matmul(const CpuMatrix& a, const CpuF32Operand& b, const CpuMatrix& out);

// `batch` products out_q = a_q * b_q, one cpu_matmul each: matrix q of each
// operand starts `stride_*` elements after matrix q-1.
struct BatchStrides {
  std::int64_t a = 0, b = 0, out = 0;
};
void cpu_matmul_batched(const CpuMatrix& a, const CpuMatrix& b, const CpuMatrix& out, std::int64_t batch,
                        const BatchStrides& strides);

}  // namespace coconet::kernels
