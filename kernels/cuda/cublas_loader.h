// cuBLAS, loaded on first use rather than at start-up: linking it makes every
// coconet command (`list`, `predict`, GEMM or not) map cuBLASLt at load time,
// about 150 MB resident before main runs. The GEMM path asks for the
// functions here; the library is dlopen'ed once (libcublas.so.<major> of the
// headers built with, found on the loader's usual path: RUNPATH,
// LD_LIBRARY_PATH, the cache).
#pragma once

#include <cublas_v2.h>

namespace coconet::kernels::cuda {

// cublasGemmEx is overloaded in C++ (a compatibility inline): the C entry point's type.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                        int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                        cublasGemmAlgo_t);

// cublasGemmStridedBatchedEx likewise (batched matmul: one product per batch index).
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                      int, const void*, const void*, cudaDataType, int, long long,
                                                      const void*, cudaDataType, int, long long, const void*, void*,
                                                      cudaDataType, int, long long, int, cublasComputeType_t,
                                                      cublasGemmAlgo_t);

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  CublasGemmEx gemm_ex = nullptr;
  CublasGemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The functions, loading the library on the first call. Throws DeviceError
// naming the library and the loader's reason when it cannot be loaded.
[[nodiscard]] const CublasApi& cublas();

// Whether the library has been loaded (a status string can be asked for).
[[nodiscard]] bool cublas_loaded();

}  // namespace coconet::kernels::cuda
