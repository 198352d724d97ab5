# coconet_bench_exec: does overlap overlap, does fusing pay (cpu backend, MPI). It must run
# under mpirun with 2 ranks; the bench_exec target does that.
if(TARGET coconet_exec AND COCONET_HAVE_MPI AND COCONET_MPIEXEC)
  add_executable(coconet_bench_exec ${CMAKE_CURRENT_SOURCE_DIR}/bench_exec.cpp)
  target_link_libraries(coconet_bench_exec PRIVATE coconet_exec benchmark::benchmark coconet_warnings)
  # The ranks pinned one to a core, as `coconet run --ranks 2` places them
  # (exec::binding_for), with the --bind-to value read from exec/mpirun.h.
  file(STRINGS ${PROJECT_SOURCE_DIR}/exec/mpirun.h _pinned REGEX "kPinnedBinding = \"")
  string(REGEX REPLACE ".*kPinnedBinding = \"([^\"]+)\".*" "\\1" _pinned "${_pinned}")
  set(_bench_mpi_flags ${COCONET_MPI_FLAGS})
  list(FIND _bench_mpi_flags "--bind-to" _bind_at)
  if(_bind_at GREATER_EQUAL 0)
    math(EXPR _bind_at "${_bind_at} + 1")
    list(REMOVE_AT _bench_mpi_flags ${_bind_at})
    list(INSERT _bench_mpi_flags ${_bind_at} "${_pinned}")
  endif()
  add_custom_target(bench_exec
    COMMAND ${CMAKE_COMMAND} -E env COCONET_ROOT=${COCONET_SOURCE_ROOT}
            ${COCONET_MPIEXEC} -np 2 ${_bench_mpi_flags} $<TARGET_FILE:coconet_bench_exec>
    DEPENDS coconet_bench_exec USES_TERMINAL
    COMMENT "Overlap and fused-op benchmarks of the cpu backend under mpirun -np 2")
endif()
