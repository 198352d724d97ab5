# Tests of validation/: metrics against hand-computed cases, report writing
# (atomic, well-formed, self-contained), calibration fits, and `coconet
# calibrate` + `coconet validate` end to end on 2 MPI ranks.
#
# Run as a script (cmake -DCHECK_REPORT=DIR -P validation.cmake) it checks that
# a report folder is complete; the end-to-end tests use it that way.
if(DEFINED CHECK_REPORT)
  foreach(f report.html report.md results.csv results.json trace.json trace-measured.json inputs/experiment.yaml
            inputs/topology.yaml inputs/schedules.yaml inputs/command.txt inputs/commit.txt inputs/machine.yaml
            inputs/workload-sgd.yaml)
    if(NOT EXISTS ${CHECK_REPORT}/${f})
      message(FATAL_ERROR "report ${CHECK_REPORT} lacks ${f}")
    endif()
  endforeach()
  file(READ ${CHECK_REPORT}/results.json json)
  foreach(key mape_pct max_error_pct spearman top1_agreement regret_pct)
    string(JSON value ERROR_VARIABLE err GET "${json}" metrics ${key})
    if(err)
      message(FATAL_ERROR "results.json has no metrics.${key}: ${err}")
    endif()
  endforeach()
  string(JSON rows LENGTH "${json}" rows)
  if(rows LESS 4)
    message(FATAL_ERROR "results.json has ${rows} rows, expected one per schedule and size")
  endif()
  string(JSON verified GET "${json}" rows 0 verified)
  if(NOT verified)
    message(FATAL_ERROR "the first row was not verified")
  endif()
  file(READ ${CHECK_REPORT}/report.html html)
  if(html MATCHES "://|<script")
    message(FATAL_ERROR "report.html is not self-contained")
  endif()
  return()
endif()

add_executable(test_validation
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_metrics.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_stats.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_report.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_fit.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_regimes.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_progress.cpp
)
if(TARGET coconet_exec)  # the calibrated range reads microbenchmark samples: built with the executor
  target_sources(test_validation PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_range.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_speed.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_spell_guard.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_sweep.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_trace.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_overlap_fit.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_machine.cpp)
endif()
# Unity batches (cmake/build_time.cmake): test_validation_speed.cpp's
# file-scope sample() is test_validation_report.cpp's too; in a batch, GCC 12
# at -O3 inlines the string concatenations of test_validation_regimes.cpp and
# test_validation_sweep.cpp into a false -Warray-bounds (compiled alone they do not warn).
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_speed.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_regimes.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_validation_sweep.cpp
  PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
target_link_libraries(test_validation PRIVATE coconet_validation nlohmann_json::nlohmann_json GTest::gtest_main
  coconet_warnings)
target_link_libraries(test_validation PRIVATE coconet_test_paths)
gtest_discover_tests(test_validation TEST_PREFIX "validation.")

if(TARGET coconet AND COCONET_HAVE_MPI AND COCONET_MPIEXEC)
  set(_val_dir ${CMAKE_CURRENT_BINARY_DIR}/validation_e2e)
  add_test(NAME validation.e2e.calibrate_2_ranks
    COMMAND coconet calibrate --backend cpu --ranks 2 --quick --iters 2 --wait-s 2 --out ${_val_dir}/cal-2.yaml)
  set_tests_properties(validation.e2e.calibrate_2_ranks PROPERTIES
    FIXTURES_SETUP validation_topology TIMEOUT 300 PROCESSORS 2
    ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT};COCONET_MPIRUN=${COCONET_MPIEXEC}")
  add_test(NAME validation.e2e.validate_tiny_2_ranks
    COMMAND coconet validate ${COCONET_SOURCE_ROOT}/validation/testdata/validate-tiny.yaml --backend cpu --ranks 2
            --topology ${_val_dir}/cal-2.yaml --budget-s 5 --wait-s 5 --out ${_val_dir}/report)
  set_tests_properties(validation.e2e.validate_tiny_2_ranks PROPERTIES
    FIXTURES_REQUIRED validation_topology FIXTURES_SETUP validation_report TIMEOUT 300 PROCESSORS 2
    ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT};COCONET_MPIRUN=${COCONET_MPIEXEC}")
  add_test(NAME validation.e2e.report_complete
    COMMAND ${CMAKE_COMMAND} -DCHECK_REPORT=${_val_dir}/report -P ${CMAKE_CURRENT_SOURCE_DIR}/validation.cmake)
  set_tests_properties(validation.e2e.report_complete PROPERTIES FIXTURES_REQUIRED validation_report)
  # The check must be able to fail: an empty folder is not a report.
  file(MAKE_DIRECTORY ${_val_dir}/not-a-report)
  add_test(NAME validation.e2e.report_check_rejects_empty
    COMMAND ${CMAKE_COMMAND} -DCHECK_REPORT=${_val_dir}/not-a-report -P ${CMAKE_CURRENT_SOURCE_DIR}/validation.cmake)
  set_tests_properties(validation.e2e.report_check_rejects_empty PROPERTIES WILL_FAIL TRUE)
  # Bad input is reported before any rank starts, with exit code 2.
  add_test(NAME validation.e2e.unknown_experiment
    COMMAND coconet validate no-such-experiment --backend cpu --ranks 2 --out ${_val_dir}/never)
  set_tests_properties(validation.e2e.unknown_experiment PROPERTIES
    PASS_REGULAR_EXPRESSION "unknown experiment 'no-such-experiment'"
    ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
  # More ranks than cores are refused unless asked for; a bad budget names its flag. Both exit 2.
  add_test(NAME validation.e2e.oversubscription_refused
    COMMAND coconet validate ${COCONET_SOURCE_ROOT}/validation/testdata/validate-tiny.yaml --backend cpu
            --ranks 200 --out ${_val_dir}/never)
  set_tests_properties(validation.e2e.oversubscription_refused PROPERTIES
    PASS_REGULAR_EXPRESSION "--ranks 200: this machine has [0-9]+ cores.*--oversubscribe"
    ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
  add_test(NAME validation.e2e.bad_budget
    COMMAND coconet validate --budget-s -5 --out ${_val_dir}/never)
  set_tests_properties(validation.e2e.bad_budget PROPERTIES PASS_REGULAR_EXPRESSION "--budget-s: needs a whole number")
  # --wait-s as --budget-s, on both commands that wait out spells.
  add_test(NAME validation.e2e.bad_wait
    COMMAND coconet validate --wait-s -1 --out ${_val_dir}/never)
  set_tests_properties(validation.e2e.bad_wait PROPERTIES PASS_REGULAR_EXPRESSION "--wait-s: needs a whole number")
  add_test(NAME validation.e2e.bad_calibrate_wait
    COMMAND coconet calibrate --wait-s -1 --out ${_val_dir}/never.yaml)
  set_tests_properties(validation.e2e.bad_calibrate_wait PROPERTIES
    PASS_REGULAR_EXPRESSION "--wait-s: needs a whole number")
  add_test(NAME validation.e2e.reference
    COMMAND coconet validate --reference --out ${_val_dir}/reference)
  set_tests_properties(validation.e2e.reference PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
endif()

# Hostile paths and interruptions around what coconet writes (issue 14).
add_executable(test_hostile_writes ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_hostile_writes.cpp)
target_link_libraries(test_hostile_writes PRIVATE coconet_validation yaml-cpp GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_hostile_writes TEST_PREFIX "errors.hostile.writes.")
