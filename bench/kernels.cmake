# Speed of the cpu backend's kernels (kernels/cpu_elementwise.h, kernels/cpu_matmul.h) on one core,
# each as a ratio to this machine's limit measured in the same run: STREAM's triad bandwidth and
# Eigen's GEMM, both built for this CPU (bench/cpu_limits.cpp, -march=native where the compiler has it).
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-march=native COCONET_HAVE_MARCH_NATIVE)
add_executable(coconet_bench_kernels ${CMAKE_CURRENT_SOURCE_DIR}/bench_kernels.cpp ${CMAKE_CURRENT_SOURCE_DIR}/cpu_limits.cpp)
target_link_libraries(coconet_bench_kernels PRIVATE coconet_kernels coconet_model benchmark::benchmark Eigen3::Eigen
                      coconet_warnings)
if(COCONET_HAVE_MARCH_NATIVE)
  # GCC 12 warns of its own AVX-512 intrinsics' undefined registers (GCC bug 105593).
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/cpu_limits.cpp PROPERTIES
    COMPILE_OPTIONS "-march=native;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>"
    COMPILE_DEFINITIONS COCONET_BENCH_NATIVE)
endif()
