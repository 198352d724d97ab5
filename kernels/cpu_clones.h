// Function multiversioning for the cpu kernels' loops: a function marked
// COCONET_CPU_CLONES is compiled three times, for x86-64-v4 (AVX-512),
// x86-64-v3 (AVX2, FMA, F16C) and the baseline, and the loader picks the
// widest one the CPU runs (GCC's target_clones, an ifunc). `flatten` inlines
// every callee into each clone, so the loops inside vectorise at the clone's
// width; out-of-line copies of those callees stay baseline code, so no
// shared symbol ever holds instructions the CPU may lack.
// Values are the same at every width: the library is built without FP
// contraction (kernels/cpu.cmake), and vector add, multiply, divide, sqrt and
// compare round as their scalar forms do.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COCONET_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#else
#define COCONET_CPU_CLONES
#endif
