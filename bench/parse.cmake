# Speed of the front end: parsing and checking programs of 1k, 10k, 100k statements (linear).
add_executable(coconet_bench_parse ${CMAKE_CURRENT_SOURCE_DIR}/bench_parse.cpp)
target_link_libraries(coconet_bench_parse PRIVATE coconet_model benchmark::benchmark coconet_warnings)
