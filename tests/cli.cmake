# The `coconet` command run as a process: its exit codes (0, 2, 130) as a
# parent sees them. Exit codes of `run` on bad input are in exec.cmake
# (errors.run.*), of `validate` in validation.cmake.
if(TARGET coconet)
  add_executable(test_cli_exit_codes ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_cli_exit_codes.cpp)
  target_link_libraries(test_cli_exit_codes PRIVATE coconet_model GTest::gtest_main coconet_warnings)
  target_compile_definitions(test_cli_exit_codes PRIVATE COCONET_BINARY="$<TARGET_FILE:coconet>")
  add_dependencies(test_cli_exit_codes coconet)
  gtest_discover_tests(test_cli_exit_codes TEST_PREFIX "cli." PROPERTIES TIMEOUT 60
                       ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
endif()
