# Tests of the cuda backend and kernels (built when COCONET_HAVE_CUDA).
#   test_gpu_host: the host-side parts (checks, plans, conversions, watchdog,
#     validation, the no-GPU path); runs on any machine, GPU or not.
#   test_gpu: kernels vs CPU references, the runtime on every workload, the
#     fused collective; each test GTEST_SKIPs with the reason when no GPU.
if(COCONET_HAVE_CUDA AND TARGET coconet_exec AND TARGET coconet_kernels_cuda)
  add_executable(test_gpu_host ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_cuda_host.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_lsa_program_host.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_tile_plan_host.cpp)
  target_link_libraries(test_gpu_host PRIVATE coconet_exec coconet_kernels_cuda_reference GTest::gtest_main
    coconet_warnings)
  gtest_discover_tests(test_gpu_host TEST_PREFIX "gpu_host." DISCOVERY_MODE PRE_TEST)

  add_executable(test_gpu
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_cuda_kernels.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_cuda_runtime.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_fused_program_lsa.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_tile_gemm.cpp
  )
  target_link_libraries(test_gpu PRIVATE coconet_exec coconet_kernels_cuda_reference GTest::gtest_main
    coconet_warnings)
  gtest_discover_tests(test_gpu TEST_PREFIX "gpu." DISCOVERY_MODE PRE_TEST)

  if(TARGET coconet)
    add_test(NAME gpu_cli.run_cuda_without_gpu_exits_2
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu/run_without_gpu.sh $<TARGET_FILE:coconet>)
    set_tests_properties(gpu_cli.run_cuda_without_gpu_exits_2 PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endif()

# The bundle the first GPU run travels with (scripts/gpu-bundle.sh): packed
# from this build's cuda programs (or a bundle built at gpu-bundle/), its
# library closure, and gpu-check.sh --dry-run from it. Skipped, saying so,
# when this build has no cuda backend.
set(COCONET_BUNDLE_TEST ${CMAKE_CURRENT_SOURCE_DIR}/gpu/bundle_test.sh)
foreach(mode pack closure dry_run)
  add_test(NAME gpu_bundle.${mode}
    COMMAND ${COCONET_BUNDLE_TEST} ${mode} ${COCONET_SOURCE_ROOT} ${CMAKE_BINARY_DIR}
            ${CMAKE_CURRENT_BINARY_DIR}/gpu-bundle-test)
  set_tests_properties(gpu_bundle.${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endforeach()
set_tests_properties(gpu_bundle.pack PROPERTIES FIXTURES_SETUP gpu_bundle)
set_tests_properties(gpu_bundle.closure gpu_bundle.dry_run PROPERTIES FIXTURES_REQUIRED gpu_bundle)

# The GPU check's summary (scripts/gpu_check_summary.py) on the reports of a
# healthy GPU machine and of broken ones: expected skips are the ones the
# tests declare (COCONET_EXPECTED_SKIP). Needs no CUDA.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME gpu_check.summary
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_gpu_check_summary.py ${COCONET_SOURCE_ROOT})
endif()
