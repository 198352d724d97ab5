# coconet_kernels: the CPU kernels
# (cpu_*.cpp: tile interpreter, Eigen matmul, row reductions) the cpu backend calls, and the
# failure reports of the library check macros (check.cpp; mpi_check.cpp, the
# MPI check every backend uses, when MPI is found).
add_library(coconet_kernels
  ${CMAKE_CURRENT_LIST_DIR}/cpu_elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_convert.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_gemm_baseline.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_rowreduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/check.cpp
)
target_include_directories(coconet_kernels PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(coconet_kernels PUBLIC coconet_model PRIVATE Eigen3::Eigen coconet_warnings)
# The kernels compute what the interpreter computes, element for element:
# no fused multiply-adds the source does not write (GCC contracts a*b+c by
# default outside ISO C, even in C++ with -std=c++20), and sqrt without errno
# (the same correctly rounded value; without errno the loops vectorise).
target_compile_options(coconet_kernels PRIVATE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-ffp-contract=off -fno-math-errno>)
if(COCONET_HAVE_MPI)
  target_sources(coconet_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/mpi_check.cpp)
  target_link_libraries(coconet_kernels PRIVATE MPI::MPI_CXX)
endif()
# The GEMM's x86 levels (kernels/cpu_gemm.h): the same source compiled for
# AVX2+FMA and for AVX-512, run only on a CPU that has them.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(_gemm_avx2 ${CMAKE_CURRENT_LIST_DIR}/cpu_gemm_avx2_fma.cpp)
  set(_gemm_avx512 ${CMAKE_CURRENT_LIST_DIR}/cpu_gemm_avx512.cpp)
  target_sources(coconet_kernels PRIVATE ${_gemm_avx2} ${_gemm_avx512})
  set_source_files_properties(${_gemm_avx2} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  # GCC 12 warns of its own AVX-512 intrinsics' deliberately undefined
  # registers (_mm512_undefined_ps; GCC bug 105593): silenced for this file.
  set(_no_false_warning $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
  set_source_files_properties(${_gemm_avx512} PROPERTIES
    COMPILE_OPTIONS "-mavx512f;-mavx512dq;-mavx512vl;-mavx512bw;-mavx2;-mfma;-mf16c;${_no_false_warning}")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu_gemm.cpp PROPERTIES
    COMPILE_DEFINITIONS COCONET_GEMM_X86_LEVELS)
endif()
