# Tests of lowering (plan/): what each op moves and computes, which fused
# stages each backend's capabilities turn into one op, chunking and issue
# order; and the plan-execution check: every rank's executor runs the plan
# the simulator prices, for every workload x schedule x P.
add_executable(test_plan ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_plan.cpp)
target_link_libraries(test_plan PRIVATE coconet_plan GTest::gtest_main coconet_warnings)
target_link_libraries(test_plan PRIVATE coconet_test_paths)
gtest_discover_tests(test_plan TEST_PREFIX "plan." PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")

add_executable(test_plan_execution ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_plan_execution.cpp)
target_link_libraries(test_plan_execution PRIVATE coconet_exec coconet_sim GTest::gtest_main coconet_warnings)
target_link_libraries(test_plan_execution PRIVATE coconet_test_paths)
gtest_discover_tests(test_plan_execution TEST_PREFIX "plan." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
