# bench_gpu: kernel bandwidth vs device copy bandwidth, fused vs unfused
# optimizers, the generic element-wise kernel on Adam's generated program vs
# the hand-written Adam kernel, chunked vs single GEMM at the Megatron shapes, fused RS+Adam+AG
# paths (bench/bench_gpu.cu). Built with the cuda backend; without a GPU it
# says so and exits 0.
if(COCONET_HAVE_CUDA AND TARGET coconet_exec AND TARGET coconet_kernels_cuda)
  add_executable(bench_gpu ${CMAKE_CURRENT_SOURCE_DIR}/bench_gpu.cu
    ${CMAKE_CURRENT_SOURCE_DIR}/bench_gpu_programs.cpp)
  coconet_cuda_target(bench_gpu)
  target_link_libraries(bench_gpu PRIVATE coconet_exec coconet_kernels_cuda_reference benchmark::benchmark)
endif()
