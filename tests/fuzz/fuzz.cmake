# libFuzzer targets of the parsers (issue 14), built with COCONET_FUZZ=ON by
# clang (make fuzz): workload, expression, topology, experiment, schedule,
# tune_file (issue 34: tune files of many documents) and model (models/*.yaml).
# Each target takes arbitrary bytes; a UserError is the expected answer to
# bad input; anything else (a crash, a sanitizer report, an InternalError,
# another exception, a hang) is a finding. Seeds: tests/fuzz/corpus/<target>/.
if(COCONET_FUZZ)
  foreach(target workload expression topology experiment schedule tune_file model)
    add_executable(fuzz_${target} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${target}.cpp)
    target_link_libraries(fuzz_${target} PRIVATE coconet_model coconet_sim coconet_step coconet_warnings)
    target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${target} PRIVATE coconet_test_paths)
  endforeach()
endif()
