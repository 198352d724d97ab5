// cuBLAS GEMMs and the chunked GEMM of ol(MM, ...) (see gemm.h).
//
// Design notes
// - Row-major C = A * B is column-major C^T = B^T * A^T, so cuBLAS is called
//   with the operands swapped and no transposes; strides carry over unchanged.
// - cublasGemmEx with CUBLAS_COMPUTE_32F: f16/bf16 inputs use tensor cores and
//   accumulate in f32, f32 inputs compute in full f32 (no TF32), so integer
//   inputs give exact sums below 2^24.
#include "kernels/cuda/gemm.h"

#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/view.h"
#include "model/error.h"

namespace coconet::kernels::cuda {
namespace {

cudaDataType_t cuda_type(model::DType t) {
  switch (t) {
    case model::DType::f16: return CUDA_R_16F;
    case model::DType::bf16: return CUDA_R_16BF;
    case model::DType::f32: break;
  }
  return CUDA_R_32F;
}

int as_int(std::int64_t x, const char* what) {
  if (x < 0 || x > INT32_MAX)
    throw UserError(std::string("gemm: ") + what + " = " + std::to_string(x) +
                    " is outside cuBLAS's 32-bit range; cut the matmul into smaller pieces");
  return static_cast<int>(x);
}

}  // namespace

void validate(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) throw UserError("gemm: m, n and k must be non-negative");
  if (g.lda < g.k || g.ldb < g.n || g.ldc < g.n)
    throw UserError("gemm: row strides must be at least the row lengths (lda >= k, ldb >= n, ldc >= n)");
  if (g.c_dtype != g.ab_dtype && g.c_dtype != model::DType::f32)
    throw UserError("gemm: the output must have the inputs' storage type or f32");
  (void)as_int(g.m, "m");
  (void)as_int(g.n, "n");
  (void)as_int(g.k, "k");
  if (g.batch < 1) throw UserError("gemm: a batch holds at least one product");
  (void)as_int(g.batch, "batch");
  if (g.batch > 1 && (g.stride_a < 0 || g.stride_b < 0 || g.stride_c < g.m * g.ldc))
    throw UserError("gemm: batch strides must be non-negative, C's at least one whole product (m * ldc)");
}

std::vector<Span1d> chunk_rows(std::int64_t m, int chunks, std::int64_t align) {
  if (chunks < 1) throw UserError("chunked gemm: chunks must be at least 1");
  if (align < 1) align = 1;
  const std::int64_t tiles = (m + align - 1) / align;
  const int pieces = static_cast<int>(std::min<std::int64_t>(chunks, std::max<std::int64_t>(tiles, 1)));
  std::vector<Span1d> out;
  for (int c = 0; c < pieces; ++c) {
    const Span1d t = shard_of(tiles, pieces, c);
    const std::int64_t begin = std::min(t.begin * align, m);
    const std::int64_t end = std::min((t.begin + t.size) * align, m);
    if (end > begin || (m == 0 && c == 0)) out.push_back({begin, end - begin});
  }
  return out;
}

GemmArgs rows_of(const GemmArgs& g, Span1d rows) {
  GemmArgs r = g;
  r.m = rows.size;
  r.a = static_cast<const char*>(g.a) + rows.begin * g.lda * storage_bytes(g.ab_dtype);
  r.c = static_cast<char*>(g.c) + rows.begin * g.ldc * storage_bytes(g.c_dtype);
  return r;
}

cublasHandle_t Blas::handle() const {
  if (handle_ == nullptr) {
    cublasHandle_t h = nullptr;
    COCONET_CUBLAS_CHECK(api().create(&h));
    const cublasStatus_t mode = api().set_math_mode(h, kGemmMathMode);
    if (mode != CUBLAS_STATUS_SUCCESS) {
      (void)api().destroy(h);
      COCONET_CUBLAS_CHECK(mode);
    }
    handle_ = h;
  }
  return handle_;
}

Blas::~Blas() {
  if (handle_ != nullptr) (void)api().destroy(handle_);
}

void gemm(const Blas& blas, const GemmArgs& g, cudaStream_t stream) {
  validate(g);
  if (g.m == 0 || g.n == 0) return;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const CublasApi& api = blas.api();
  COCONET_CUBLAS_CHECK(api.set_stream(blas.handle(), stream));
  if (g.batch > 1) {
    COCONET_CUBLAS_CHECK(api.gemm_strided_batched_ex(
        blas.handle(), CUBLAS_OP_N, CUBLAS_OP_N, as_int(g.n, "n"), as_int(g.m, "m"), as_int(g.k, "k"), &alpha, g.b,
        cuda_type(g.ab_dtype), as_int(g.ldb, "ldb"), g.stride_b, g.a, cuda_type(g.ab_dtype), as_int(g.lda, "lda"),
        g.stride_a, &beta, g.c, cuda_type(g.c_dtype), as_int(g.ldc, "ldc"), g.stride_c, as_int(g.batch, "batch"),
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  COCONET_CUBLAS_CHECK(api.gemm_ex(
      blas.handle(), CUBLAS_OP_N, CUBLAS_OP_N, as_int(g.n, "n"), as_int(g.m, "m"),
      as_int(g.k, "k"), &alpha, g.b, cuda_type(g.ab_dtype), as_int(g.ldb, "ldb"), g.a,
      cuda_type(g.ab_dtype), as_int(g.lda, "lda"), &beta, g.c, cuda_type(g.c_dtype),
      as_int(g.ldc, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void chunked_gemm(const Blas& blas, const GemmArgs& g, std::span<const Span1d> chunks,
                  cudaStream_t compute, cudaStream_t comm, std::span<cudaEvent_t> events,
                  const std::function<void(int, Span1d)>& on_chunk) {
  if (events.size() < chunks.size())
    throw UserError("chunked gemm: one event per chunk is needed");
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    gemm(blas, rows_of(g, chunks[c]), compute);
    COCONET_CUDA_CHECK(cudaEventRecord(events[c], compute));
    COCONET_CUDA_CHECK(cudaStreamWaitEvent(comm, events[c], 0));
    if (on_chunk) on_chunk(static_cast<int>(c), chunks[c]);
  }
}

}  // namespace coconet::kernels::cuda
