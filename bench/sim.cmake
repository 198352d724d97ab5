# Speed of prediction: one collective, the whole default experiment through the
# tuner, one step simulated at 4096 GPUs.
add_executable(coconet_bench_sim ${CMAKE_CURRENT_SOURCE_DIR}/bench_sim.cpp)
target_link_libraries(coconet_bench_sim PRIVATE coconet_sim benchmark::benchmark coconet_warnings)
