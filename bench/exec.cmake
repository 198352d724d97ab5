# coconet_bench_exec: does overlap overlap (cpu backend, MPI). It must run
# under mpirun with 2 ranks; the bench_exec target does that.
if(TARGET coconet_exec AND COCONET_HAVE_MPI AND COCONET_MPIEXEC)
  add_executable(coconet_bench_exec ${CMAKE_CURRENT_SOURCE_DIR}/bench_exec.cpp)
  target_link_libraries(coconet_bench_exec PRIVATE coconet_exec benchmark::benchmark coconet_warnings)
  set(COCONET_BENCH_MPI_FLAGS --oversubscribe --bind-to none --mca btl self,vader
      --mca btl_vader_single_copy_mechanism none
      --mca mpi_yield_when_idle 1)
  execute_process(COMMAND id -u OUTPUT_VARIABLE COCONET_BENCH_UID OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(COCONET_BENCH_UID STREQUAL "0")
    list(APPEND COCONET_BENCH_MPI_FLAGS --allow-run-as-root)
  endif()
  add_custom_target(bench_exec
    COMMAND ${CMAKE_COMMAND} -E env COCONET_ROOT=${COCONET_SOURCE_ROOT}
            ${COCONET_MPIEXEC} -np 2 ${COCONET_BENCH_MPI_FLAGS} $<TARGET_FILE:coconet_bench_exec>
    DEPENDS coconet_bench_exec USES_TERMINAL
    COMMENT "Overlap benchmark of the cpu backend under mpirun -np 2")
endif()
