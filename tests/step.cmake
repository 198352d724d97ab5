# Tests of whole training steps (step/): model descriptions and their errors,
# the composition's properties, the layout search, Megatron-LM's Table 1.
add_executable(test_step ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step.cpp)
target_link_libraries(test_step PRIVATE coconet_step GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_step TEST_PREFIX "step." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
add_executable(test_step_trace ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step_trace.cpp)
target_link_libraries(test_step_trace PRIVATE coconet_step nlohmann_json::nlohmann_json GTest::gtest_main
                      coconet_warnings)
gtest_discover_tests(test_step_trace TEST_PREFIX "step." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
