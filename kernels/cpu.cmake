# coconet_kernels: the backend-neutral element-wise program compiler
# (elementwise_program.cpp, usable by every backend) and the CPU kernels
# (cpu_*.cpp: tile interpreter, Eigen matmul) the cpu backend calls.
add_library(coconet_kernels
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_program.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_matmul.cpp
)
target_include_directories(coconet_kernels PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(coconet_kernels PUBLIC coconet_model coconet_math PRIVATE Eigen3::Eigen coconet_warnings)
