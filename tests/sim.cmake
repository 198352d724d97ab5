# Tests of performance prediction: topologies, the collective and compute
# models (with accuracy against published figures), the event simulator, the
# tuner's choices against the paper's findings, collective resolution, the
# NCCL constants table, and topology input errors.
add_executable(test_sim
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_topology.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_collective.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_alltoall.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_compute.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_simulator.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_tuner.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_properties.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_ranks.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_resolve.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_nccl_table.cpp
)
# Unity batches (cmake/build_time.cmake): these define a file-scope
# workload() or kWorkloads as test_sim_properties.cpp does.
set_source_files_properties(
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_simulator.cpp ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_tuner.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_ranks.cpp ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_sim_resolve.cpp
  PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
target_link_libraries(test_sim PRIVATE coconet_sim yaml-cpp nlohmann_json::nlohmann_json GTest::gtest_main
  coconet_warnings)
target_link_libraries(test_sim PRIVATE coconet_test_paths)
gtest_discover_tests(test_sim TEST_PREFIX "sim." DISCOVERY_TIMEOUT 60)

add_executable(test_topology_errors ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_topology_errors.cpp)
target_link_libraries(test_topology_errors PRIVATE coconet_sim GTest::gtest_main coconet_warnings)
target_link_libraries(test_topology_errors PRIVATE coconet_test_paths)
gtest_discover_tests(test_topology_errors TEST_PREFIX "errors.")
