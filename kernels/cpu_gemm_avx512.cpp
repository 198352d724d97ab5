// The avx512 level of kernels/cpu_gemm.h (instruction set flags: kernels/cpu.cmake).
#define Eigen coconet_eigen_avx512
#define COCONET_GEMM_FUNCTION gemm_f32_avx512
#include "kernels/cpu_gemm_eigen.inc"
