// COCONET_HD: marks an inline function callable from host code and, under
// nvcc, from device code, so the model's element-wise semantics (model/ops.h)
// and the kernels' helpers (model/half.h, model/elementwise_program.h)
// are one definition on every backend. Plain `inline` outside nvcc.
#pragma once

#if defined(__CUDACC__)
#define COCONET_HD __host__ __device__ __forceinline__
#else
#define COCONET_HD inline
#endif
