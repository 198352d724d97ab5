# Speed of the cpu backend's element-wise engine (kernels/cpu_elementwise.h): ns per element of a
# scaling, an axpy and Adam's update, with f16 and f32 operands.
add_executable(coconet_bench_kernels ${CMAKE_CURRENT_SOURCE_DIR}/bench_kernels.cpp)
target_link_libraries(coconet_bench_kernels PRIVATE coconet_kernels coconet_model benchmark::benchmark coconet_warnings)
