// The avx2_fma level of kernels/cpu_gemm.h (instruction set flags: kernels/cpu.cmake).
#define Eigen coconet_eigen_avx2_fma
#define COCONET_GEMM_FUNCTION gemm_f32_avx2_fma
#include "kernels/cpu_gemm_eigen.inc"
