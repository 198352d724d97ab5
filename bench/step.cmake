# Speed of whole-step prediction: one step, and the layout search of GPT-3 175B
# on 1024 H100 (goal: under 1 s).
add_executable(coconet_bench_step ${CMAKE_CURRENT_SOURCE_DIR}/bench_step.cpp)
target_link_libraries(coconet_bench_step PRIVATE coconet_step benchmark::benchmark coconet_warnings)
