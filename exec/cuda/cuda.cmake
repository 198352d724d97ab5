# The cuda backend (exec/cuda/): compiled into coconet_exec when CUDA, NCCL and
# MPI are found (COCONET_HAVE_CUDA); the runtime selects it by name "cuda"
# through make_backend() (COCONET_EXEC_HAVE_CUDA). Plain C++ here: the device
# code lives in coconet_kernels_cuda (kernels/cuda/).
target_sources(coconet_exec PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cuda_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_convert.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lsa_fused_call.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_bootstrap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_watchdog.cpp
)
target_link_libraries(coconet_exec PUBLIC coconet_kernels_cuda PRIVATE fmt::fmt)
target_compile_definitions(coconet_exec PUBLIC COCONET_EXEC_HAVE_CUDA=1)
