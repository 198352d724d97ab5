# Tests of schedules, transformations, enumeration and the reference
# interpreter (unit), the equivalence property of every schedule, and the
# transformations and schedule files that must be rejected (errors).
set(COCONET_SCHED_TEST_TARGETS test_sched_unit test_sched_equivalence test_sched_errors)

add_executable(test_sched_unit
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_schedule.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_transforms.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_enumerate.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_interpreter.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_value_bounds.cpp
)
# Unity batches (cmake/build_time.cmake): its file-scope workload() is an earlier source's too.
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/unit/test_value_bounds.cpp
  PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
add_executable(test_sched_equivalence ${CMAKE_CURRENT_SOURCE_DIR}/equivalence/test_equivalence.cpp)
add_executable(test_sched_errors ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_schedule_errors.cpp)

foreach(t IN LISTS COCONET_SCHED_TEST_TARGETS)
  target_include_directories(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${t} PRIVATE coconet_model fmt::fmt GTest::gtest_main coconet_warnings)
  target_link_libraries(${t} PRIVATE coconet_test_paths)
endforeach()

gtest_discover_tests(test_sched_unit TEST_PREFIX "schedule.")
gtest_discover_tests(test_sched_equivalence TEST_PREFIX "equivalence.")
gtest_discover_tests(test_sched_errors TEST_PREFIX "errors.")
