// What this machine allows one core, measured in the running benchmark so
// that a kernel's figure is printed as a ratio to a limit taken side by side:
// STREAM's triad bandwidth and Eigen's f32 GEMM built for this very CPU
// (bench/cpu_limits.cpp, compiled with -march=native).
#pragma once

#include <cstdint>

namespace coconet::bench {

// STREAM's triad a[i] = b[i] + q * c[i] over `elements` f32 (McCalpin,
// "STREAM: Sustainable Memory Bandwidth in High Performance Computers",
// https://www.cs.virginia.edu/stream/ref.html): 24 bytes an element counted
// (two reads, one write; write-allocate traffic not counted), as STREAM does.
inline constexpr double kTriadBytesPerElement = 3 * sizeof(float);

// This thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID): every figure
// here is timed with it, so time the thread spends descheduled on a shared
// machine counts for neither a kernel nor its limit (a memory stall does).
[[nodiscard]] double thread_seconds();

// One triad pass.
void triad(float* a, const float* b, const float* c, float q, std::int64_t elements);

// Eigen's GEMM c = a * b, row-major dense f32, built with -march=native.
void reference_gemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k);

// One triad pass over `elements` on buffers kept for the whole run (their
// pages touched when first made); its time in seconds (thread_seconds). A benchmark
// alternates its kernel with these passes, so kernel and limit share the
// machine's state of the moment (a shared machine's load drifts).
[[nodiscard]] double triad_pass_seconds(std::int64_t elements);

// One product of reference_gemm at m x n x k on buffers kept for the run;
// its time in seconds (thread_seconds; 2 m n k flops).
[[nodiscard]] double reference_gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k);

// Whether this file was built for the machine (-march=native) or, where the
// compiler lacks the flag, for the baseline.
[[nodiscard]] const char* reference_build();

}  // namespace coconet::bench
