// The baseline level of kernels/cpu_gemm.h (instruction set flags: kernels/cpu.cmake).
#define Eigen coconet_eigen_baseline
#define COCONET_GEMM_FUNCTION gemm_f32_baseline
#include "kernels/cpu_gemm_eigen.inc"
