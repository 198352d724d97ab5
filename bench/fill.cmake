# The host's input fill rate (model/input_fill.h against input_at), one core.
add_executable(coconet_bench_fill ${CMAKE_CURRENT_SOURCE_DIR}/bench_fill.cpp)
target_link_libraries(coconet_bench_fill PRIVATE coconet_kernels coconet_model benchmark::benchmark coconet_warnings)
