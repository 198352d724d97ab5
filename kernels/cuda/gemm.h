// Matrix products through cuBLAS, and the chunked GEMM of the overlap
// schedules: C = A * B cut along C's rows into chunks, each chunk's GEMM on
// the compute stream followed by an event, and the chunk's collective queued
// on the communication stream as soon as that event says the chunk is done
// (the paper's ol(MM, ...)).
//
// Layout: row-major, A is m x k (row stride lda), B is k x n (ldb), C is
// m x n (ldc), all in elements. A and B share a storage type; C has theirs
// or f32. Accumulation is f32 (CUBLAS_COMPUTE_32F). A batched GEMM is one
// strided batched cuBLAS call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/cuda/cublas_loader.h"
#include "kernels/cuda/grid.h"
#include "model/types.h"

namespace coconet::kernels::cuda {

struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  model::DType ab_dtype = model::DType::f16;
  model::DType c_dtype = model::DType::f16;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  // A batched matmul: `batch` products, matrix q of A, B and C starting
  // q * stride_a, q * stride_b and q * stride_c elements after the first
  // (cublasGemmStridedBatchedEx).
  std::int64_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Throws UserError on impossible shapes, strides or type combinations.
void validate(const GemmArgs& g);

// Rows of C cut into `chunks` pieces whose boundaries fall on multiples of
// `align` rows where possible (a GEMM tile: a chunk of whole tiles keeps the
// tile count of the unchunked GEMM). Never returns an empty chunk; fewer than
// `chunks` pieces when m is small. Throws UserError when chunks < 1.
inline constexpr std::int64_t kChunkRowAlign = 128;  // the M of cuBLAS's largest sm_90 tiles
[[nodiscard]] std::vector<Span1d> chunk_rows(std::int64_t m, int chunks,
                                             std::int64_t align = kChunkRowAlign);

// The same GEMM restricted to rows [rows.begin, rows.begin + rows.size) of A and C.
[[nodiscard]] GemmArgs rows_of(const GemmArgs& g, Span1d rows);

// The math mode of every handle: tensor cores where the types allow, and no
// reduced-precision reduction. Without CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
// cuBLAS may add split-K partial sums of f16/bf16 GEMMs in the storage type
// (cuBLAS docs, cublasMath_t), so a GEMM cut into row chunks (another shape,
// another split) could round differently from the whole one.
inline constexpr cublasMath_t kGemmMathMode =
    static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);

// An owned cuBLAS handle with kGemmMathMode. The library is loaded and the
// handle created at the first GEMM (handle()), not at construction: a run
// without a matmul never maps cuBLAS. `api` is the loaded library's
// functions (kernels/cuda/cublas_loader.h); tests pass their own.
class Blas {
 public:
  using Api = const CublasApi& (*)();
  explicit Blas(Api api = cublas) : api_(api) {}
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  [[nodiscard]] const CublasApi& api() const { return api_(); }
  // The handle, created (with its math mode) on the first call.
  [[nodiscard]] cublasHandle_t handle() const;
  [[nodiscard]] bool created() const { return handle_ != nullptr; }

 private:
  Api api_;
  mutable cublasHandle_t handle_ = nullptr;
};

void gemm(const Blas& blas, const GemmArgs& g, cudaStream_t stream);

// The overlap: for each chunk c, its GEMM on `compute`, events[c] recorded,
// `comm` made to wait for events[c], then on_chunk(c, rows) queues that
// chunk's communication on `comm`. events.size() must be >= the chunk count.
void chunked_gemm(const Blas& blas, const GemmArgs& g, std::span<const Span1d> chunks,
                  cudaStream_t compute, cudaStream_t comm, std::span<cudaEvent_t> events,
                  const std::function<void(int, Span1d)>& on_chunk);

}  // namespace coconet::kernels::cuda
