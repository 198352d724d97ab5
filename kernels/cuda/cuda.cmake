# coconet_kernels_cuda: the CUDA kernels the cuda backend runs (generic
# element-wise stages, row reductions, fills, fused collectives of any
# compiled program through NCCL's device API), cuBLAS GEMMs (cuBLAS dlopen'ed on first use, cublas_loader.h: not
# linked) and the CUDA/NCCL/cuBLAS check macros (the MPI check is coconet_kernels').
# Included from kernels/CMakeLists.txt when COCONET_HAVE_CUDA; device code for
# COCONET_CUDA_ARCHITECTURES (default sm_90).
get_filename_component(COCONET_KCUDA_ROOT ${CMAKE_CURRENT_LIST_DIR}/../.. ABSOLUTE)
set(COCONET_KCUDA_DIR ${CMAKE_CURRENT_LIST_DIR})

# Settings every CUDA target of coconet shares: C++20, the chosen architectures.
function(coconet_cuda_target target)
  set_target_properties(${target} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON
    CUDA_ARCHITECTURES "${COCONET_CUDA_ARCHITECTURES}")
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
endfunction()

add_library(coconet_kernels_cuda STATIC
  ${COCONET_KCUDA_DIR}/check.cpp
  ${COCONET_KCUDA_DIR}/cublas_loader.cpp
  ${COCONET_KCUDA_DIR}/occupancy.cpp
  ${COCONET_KCUDA_DIR}/gemm.cpp
  ${COCONET_KCUDA_DIR}/collectives.cpp
  ${COCONET_KCUDA_DIR}/alltoall.cpp
  ${COCONET_KCUDA_DIR}/elementwise.cu
  ${COCONET_KCUDA_DIR}/rowreduce.cu
  ${COCONET_KCUDA_DIR}/norm.cu
  ${COCONET_KCUDA_DIR}/fill.cu
  ${COCONET_KCUDA_DIR}/lsa_comm.cu
  ${COCONET_KCUDA_DIR}/fused_program_lsa.cu
  ${COCONET_KCUDA_DIR}/lsa_program_plan.cpp
  ${COCONET_KCUDA_DIR}/tile_plan.cpp
  ${COCONET_KCUDA_DIR}/tile_gemm.cu
)
target_include_directories(coconet_kernels_cuda PUBLIC ${COCONET_KCUDA_ROOT} ${NCCL_INCLUDE_DIR})
target_link_libraries(coconet_kernels_cuda
  PUBLIC coconet_kernels CUDA::cudart ${NCCL_LIBRARY} ${CMAKE_DL_LIBS}
  PRIVATE fmt::fmt coconet_warnings)
coconet_cuda_target(coconet_kernels_cuda)
set_target_properties(coconet_kernels_cuda PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_compile_options(coconet_kernels_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${COCONET_WERROR}>>:--Werror=all-warnings>)

# coconet_kernels_cuda_reference: hand-written CUDA kernels that only the GPU
# tests and benchmarks run, as references the generated path is measured and
# verified against (fused Adam and LAMB updates, the bias-dropout-residual epilogue, the fused
# Adam allreduce); not linked into the coconet binary or the backend.
add_library(coconet_kernels_cuda_reference STATIC
  ${COCONET_KCUDA_DIR}/optimizer.cu
  ${COCONET_KCUDA_DIR}/epilogue.cu
  ${COCONET_KCUDA_DIR}/fused_allreduce.cu
)
target_link_libraries(coconet_kernels_cuda_reference PUBLIC coconet_kernels_cuda PRIVATE fmt::fmt coconet_warnings)
coconet_cuda_target(coconet_kernels_cuda_reference)
set_target_properties(coconet_kernels_cuda_reference PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_compile_options(coconet_kernels_cuda_reference PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${COCONET_WERROR}>>:--Werror=all-warnings>)
