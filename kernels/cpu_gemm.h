// The f32 GEMM under the cpu backend's matmul (kernels/cpu_matmul.cpp): one
// Eigen GEMM built once per x86 instruction set level, the widest one the
// CPU runs chosen at run time, so one binary runs anywhere and reaches the
// machine's arithmetic rate where the CPU allows.
//
// Design notes
// - Each level is the same source (cpu_gemm_eigen.inc) compiled with its own
//   flags (kernels/cpu.cmake) and with Eigen's namespace renamed per level,
//   so the levels' template instantiations never share a symbol: the linker
//   cannot swap an AVX-512 copy into the baseline path or the other way.
// - The product is Eigen's: blocked, packed, accumulated in f32 (with FMA at
//   the AVX2 and AVX-512 levels, more accurate than a multiply then an add).
//   Exact for sums whose terms and partial sums are f32-representable (the
//   small-integer inputs verification uses), within the GEMM reordering
//   tolerance of exec/verify.cpp otherwise, as any blocked GEMM.
#pragma once

#include <cstdint>

namespace coconet::kernels {

// c (m x n) = a (m x k) * b (k x n), row-major with leading dimensions.
struct GemmF32 {
  const float* a = nullptr;
  std::int64_t lda = 0;
  const float* b = nullptr;
  std::int64_t ldb = 0;
  float* c = nullptr;
  std::int64_t ldc = 0;
  std::int64_t m = 0, n = 0, k = 0;
};

enum class GemmLevel : std::uint8_t { baseline, avx2_fma, avx512 };

// The widest level this build holds and this CPU runs.
[[nodiscard]] GemmLevel gemm_level();
[[nodiscard]] const char* gemm_level_name(GemmLevel level);

// c = a * b at `level` (which the CPU must run), or at gemm_level().
void gemm_f32(const GemmF32& g, GemmLevel level);
void gemm_f32(const GemmF32& g);

// The levels themselves (cpu_gemm_*.cpp).
void gemm_f32_baseline(const GemmF32& g);
void gemm_f32_avx2_fma(const GemmF32& g);
void gemm_f32_avx512(const GemmF32& g);

}  // namespace coconet::kernels
