# coconet_kernels: the backend-neutral element-wise program compiler
# (elementwise_program.cpp, usable by every backend), the CPU kernels
# (cpu_*.cpp: tile interpreter, Eigen matmul, row reductions) the cpu backend calls, and the
# failure reports of the library check macros (check.cpp; mpi_check.cpp, the
# MPI check every backend uses, when MPI is found).
add_library(coconet_kernels
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_program.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_elementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_rowreduce.cpp
  ${CMAKE_CURRENT_LIST_DIR}/check.cpp
)
target_include_directories(coconet_kernels PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(coconet_kernels PUBLIC coconet_model PRIVATE Eigen3::Eigen coconet_warnings)
if(COCONET_HAVE_MPI)
  target_sources(coconet_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/mpi_check.cpp)
  target_link_libraries(coconet_kernels PRIVATE MPI::MPI_CXX)
endif()
