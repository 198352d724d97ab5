# Tests of the `coconet` command as a user runs it: tests/cli/ (exit codes,
# json outputs, the --set rules, shared defaults, the README's examples, one
# predicted time across predict, simulate, run and validate; the tests that
# run ranks need MPI and skip without it) and tests/errors/test_cli_exit_codes
# (0, 2 and 130 as a parent process sees them). Exit codes of `run` on bad
# input are in exec.cmake (errors.run.*), of `validate` in validation.cmake.
if(TARGET coconet)
  add_executable(test_cli ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_cli.cpp)
  target_link_libraries(test_cli PRIVATE GTest::gtest_main nlohmann_json::nlohmann_json coconet_warnings)
  target_link_libraries(test_cli PRIVATE coconet_test_paths)
  if(COCONET_HAVE_MPI AND COCONET_MPIEXEC)
    target_compile_definitions(test_cli PRIVATE COCONET_TEST_HAVE_MPI=1)
  endif()
  add_dependencies(test_cli coconet)
  # 1200 s: the step commands' --search over today's layouts (cp, uneven
  # stages) takes about 27 s in a Release build on the 2-core CI machine and
  # several times that under AddressSanitizer (make sanitize), where 120 s ran out.
  gtest_discover_tests(test_cli TEST_PREFIX "cli." PROPERTIES TIMEOUT 1200
                       ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT};COCONET_MPIRUN=${COCONET_MPIEXEC}")

  add_executable(test_cli_exit_codes ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_cli_exit_codes.cpp)
  target_link_libraries(test_cli_exit_codes PRIVATE coconet_model GTest::gtest_main coconet_warnings)
  target_link_libraries(test_cli_exit_codes PRIVATE coconet_test_paths)
  add_dependencies(test_cli_exit_codes coconet)
  gtest_discover_tests(test_cli_exit_codes TEST_PREFIX "cli." PROPERTIES TIMEOUT 60
                       ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
endif()

# Hostile input through the command (issue 14): exit 2 with the limit named, safe writes.
if(TARGET coconet)
  add_executable(test_hostile_cli ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_hostile_cli.cpp)
  target_link_libraries(test_hostile_cli PRIVATE GTest::gtest_main coconet_warnings)
  target_link_libraries(test_hostile_cli PRIVATE coconet_test_paths)
  add_dependencies(test_hostile_cli coconet)
  gtest_discover_tests(test_hostile_cli TEST_PREFIX "errors.hostile.cli." PROPERTIES TIMEOUT 300)
endif()

# Hostile input on the newer surfaces (issue 34): tune files, YAML limits,
# asymmetric topologies, paths, the launcher; each case within 2 s and 200 MB.
if(TARGET coconet)
  add_executable(test_hostile_surfaces ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_hostile_surfaces.cpp)
  target_link_libraries(test_hostile_surfaces PRIVATE GTest::gtest_main coconet_warnings)
  target_link_libraries(test_hostile_surfaces PRIVATE coconet_test_paths)
  if(COCONET_HAVE_MPI AND COCONET_MPIEXEC)
    target_compile_definitions(test_hostile_surfaces PRIVATE COCONET_TEST_HAVE_MPI=1)
  endif()
  if(COCONET_SANITIZE OR COCONET_FUZZ)
    target_compile_definitions(test_hostile_surfaces PRIVATE COCONET_TEST_SANITIZED=1)
  endif()
  add_dependencies(test_hostile_surfaces coconet)
  gtest_discover_tests(test_hostile_surfaces TEST_PREFIX "errors.hostile.surfaces." PROPERTIES TIMEOUT 300)
endif()
