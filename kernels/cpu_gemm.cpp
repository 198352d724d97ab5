// Run-time choice of the GEMM level (kernels/cpu_gemm.h).
#include "kernels/cpu_gemm.h"

#include <string>

#include "model/error.h"

namespace coconet::kernels {
namespace {

// __builtin_cpu_supports (GCC, Clang) reads CPUID and, for AVX and AVX-512,
// whether the OS saves their registers (XCR0).
// A level other than the baseline only where this build compiled it.
bool cpu_runs(GemmLevel level) {
#ifdef COCONET_GEMM_X86_LEVELS
  switch (level) {
    case GemmLevel::baseline: return true;
    case GemmLevel::avx2_fma: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemmLevel::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
  }
  return false;
#else
  return level == GemmLevel::baseline;
#endif
}

}  // namespace

GemmLevel gemm_level() {
#ifdef COCONET_GEMM_X86_LEVELS
  static const GemmLevel level = [] {
    for (GemmLevel l : {GemmLevel::avx512, GemmLevel::avx2_fma})
      if (cpu_runs(l)) return l;
    return GemmLevel::baseline;
  }();
  return level;
#else
  return GemmLevel::baseline;
#endif
}

const char* gemm_level_name(GemmLevel level) {
  switch (level) {
    case GemmLevel::baseline: return "baseline";
    case GemmLevel::avx2_fma: return "avx2+fma";
    case GemmLevel::avx512: return "avx512";
  }
  return "?";
}

void gemm_f32(const GemmF32& g, GemmLevel level) {
  COCONET_ASSERT(cpu_runs(level), std::string("this CPU does not run the GEMM level ") + gemm_level_name(level));
  switch (level) {
#ifdef COCONET_GEMM_X86_LEVELS
    case GemmLevel::avx512: return gemm_f32_avx512(g);
    case GemmLevel::avx2_fma: return gemm_f32_avx2_fma(g);
#endif
    default: return gemm_f32_baseline(g);
  }
}

void gemm_f32(const GemmF32& g) { gemm_f32(g, gemm_level()); }

}  // namespace coconet::kernels
