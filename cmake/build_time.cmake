# How coconet compiles quickly: unity batches and precompiled headers.
#
# A clean build compiles about 230 translation units of 100-160k preprocessed
# lines each, 40-45 % of whose time was the front end reading the same standard
# library, fmt and GoogleTest headers again (figures in README, Performance).
# Two techniques share that work; both change how sources are grouped into
# compiler runs, never what a source means:
#  - unity batches (COCONET_UNITY): a target's sources are compiled
#    COCONET_UNITY_BATCH at a time in one compiler run, so headers are parsed,
#    and their inline functions instantiated and optimised, once per batch. The
#    batches are written here (coconet_unity_batches), not by CMake's
#    UNITY_BUILD, whose files (CMake 3.25) include each source by its absolute
#    path: a clone of the same commit in another folder (CI's) would then miss
#    every entry of the compiler cache. Ours name each source relative to the
#    repository, so a batch's text is the same wherever the clone is. A source
#    whose file-scope names clash with another's in the same target is kept out
#    of the batches (SKIP_UNITY_BUILD_INCLUSION, set next to the target), and
#    so are sources with their own compile options, definitions or include
#    folders, as CMake would.
#  - precompiled headers (COCONET_PCH): the headers below, compiled once.
#    GCC reads one precompiled header into every target that compiles with the
#    same code-generation options (one for position-independent libraries, one
#    for executables, one for test executables with GoogleTest), through a small
#    object library that owns it (REUSE_FROM). Clang rejects a precompiled
#    header whose -D definitions differ from the target's, so there each target
#    of several compiler runs gets its own.
# COCONET_UNITY=OFF and COCONET_PCH=OFF give one compiler run per source, as
# an editor's incremental rebuild of one file may prefer.

option(COCONET_UNITY "Compile each target's sources in batches (coconet_unity_batches)" ON)
set(COCONET_UNITY_BATCH 8 CACHE STRING "Sources per unity batch (COCONET_UNITY)")
option(COCONET_PCH "Precompile the standard library, fmt and GoogleTest headers" ON)


# The headers most sources include (counted over the repository's sources).
set(COCONET_PCH_HEADERS
  <algorithm> <array> <cmath> <cstdint> <cstdlib> <filesystem> <fstream> <functional> <limits> <map>
  <memory> <optional> <set> <span> <sstream> <string> <tuple> <utility> <variant> <vector>
  <fmt/core.h>)
set(COCONET_PCH_TEST_HEADERS ${COCONET_PCH_HEADERS} <gtest/gtest.h>)

# Targets compiled one source per run: kernels renames Eigen by a macro in
# each of its GEMM sources; the CUDA tests each define a file-scope kc.
set(COCONET_UNITY_EXCLUDED coconet_kernels coconet_kernels_cuda coconet_kernels_cuda_reference
  test_gpu test_gpu_host bench_gpu)
# Targets that keep their own headers: per-source instruction sets and a
# renamed Eigen (kernels), CUDA, the Python module's flags, a C-style plugin.
set(COCONET_PCH_EXCLUDED coconet_kernels coconet_kernels_cuda coconet_kernels_cuda_reference
  coconet_python coconet_nccl_tuner bench_gpu test_gpu test_gpu_host)

# Every target defined under DIR, its subdirectories included.
function(coconet_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    coconet_targets_under(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# How many compiler runs TARGET's C++ sources take (after its unity batches).
function(coconet_cxx_runs target out)
  get_target_property(sources ${target} SOURCES)
  list(FILTER sources INCLUDE REGEX "\\.(cpp|cc|cxx)$")
  list(LENGTH sources n)
  set(${out} ${n} PARENT_SCOPE)
endfunction()

# Whether SOURCE of TARGET may join a unity batch: a C++ file of the
# repository with no options, definitions or include folders of its own and
# not marked SKIP_UNITY_BUILD_INCLUSION.
function(coconet_unity_candidate target source out)
  set(${out} OFF PARENT_SCOPE)
  if(NOT source MATCHES "\\.(cpp|cc|cxx)$" OR source MATCHES "^\\$<")
    return()
  endif()
  get_target_property(dir ${target} SOURCE_DIR)
  cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${dir} OUTPUT_VARIABLE path)
  cmake_path(IS_PREFIX PROJECT_SOURCE_DIR ${path} NORMALIZE inside)
  if(NOT inside)
    return()
  endif()
  foreach(property SKIP_UNITY_BUILD_INCLUSION COMPILE_OPTIONS COMPILE_DEFINITIONS COMPILE_FLAGS INCLUDE_DIRECTORIES)
    get_source_file_property(value ${path} TARGET_DIRECTORY ${target} ${property})
    if(value)
      return()
    endif()
  endforeach()
  set(${out} ON PARENT_SCOPE)
endfunction()

# Writes unity batch N of TARGET including SOURCES (absolute paths), each by
# its path relative to the repository (reached through an include folder the
# target is given), and sets OUT to the batch's file. The file is rewritten
# only when its text changes.
function(coconet_unity_file target n sources out)
  get_target_property(bin ${target} BINARY_DIR)
  set(text "// Unity batch ${n} of ${target} (cmake/build_time.cmake).\n")
  foreach(path IN LISTS sources)
    cmake_path(RELATIVE_PATH path BASE_DIRECTORY ${PROJECT_SOURCE_DIR})
    string(APPEND text "#include \"${path}\"\n")
  endforeach()
  set(file ${bin}/unity/${target}_${n}.cxx)
  file(CONFIGURE OUTPUT ${file} CONTENT "${text}" @ONLY)
  set(${out} ${file} PARENT_SCOPE)
endfunction()

# Replaces TARGET's batchable sources by unity batches of COCONET_UNITY_BATCH.
function(coconet_unity_batches target)
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  set(kept "")
  set(pending "")
  set(batches "")
  set(n 0)
  foreach(source IN LISTS sources)
    coconet_unity_candidate(${target} ${source} candidate)
    if(NOT candidate)
      list(APPEND kept ${source})
      continue()
    endif()
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${dir} OUTPUT_VARIABLE path)
    list(APPEND pending ${path})
    list(LENGTH pending size)
    if(size EQUAL COCONET_UNITY_BATCH)
      coconet_unity_file(${target} ${n} "${pending}" file)
      list(APPEND batches ${file})
      math(EXPR n "${n} + 1")
      set(pending "")
    endif()
  endforeach()
  list(LENGTH pending size)
  if(size EQUAL 1)
    list(APPEND kept ${pending})
  elseif(size GREATER 1)
    coconet_unity_file(${target} ${n} "${pending}" file)
    list(APPEND batches ${file})
  endif()
  if(batches)
    set_property(TARGET ${target} PROPERTY SOURCES ${kept} ${batches})
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
  endif()
endfunction()

# Whether TARGET compiles against fmt::fmt (which defines FMT_SHARED), itself
# or through a library it links publicly.
function(coconet_sees_fmt target out)
  set(seen OFF)
  foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(links ${target} ${property})
    foreach(link IN LISTS links)
      if(link STREQUAL "fmt::fmt")
        set(seen ON)
      elseif(TARGET ${link} AND link MATCHES "^coconet_")
        coconet_sees_fmt(${link} through)
        if(through)
          set(seen ON)
        endif()
      endif()
    endforeach()
  endforeach()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# The object library that owns the precompiled header of one kind of target
# (GCC): PIC says position-independent, TESTS adds GoogleTest, FMT defines
# FMT_SHARED as fmt::fmt does (GCC uses a precompiled header only where the
# macros its headers test are defined alike).
function(coconet_pch_owner pic tests fmt out)
  set(owner coconet_pch_${pic}_${tests})
  set(fmt_link fmt::fmt)
  if(NOT fmt)
    set(owner ${owner}_no_fmt)
    set(fmt_link "")
  endif()
  if(NOT TARGET ${owner})
    set(source ${CMAKE_BINARY_DIR}/pch/${owner}.cpp)
    file(CONFIGURE OUTPUT ${source} CONTENT "// The translation unit that owns a precompiled header (cmake/build_time.cmake).\n")
    add_library(${owner} OBJECT ${source})
    set_target_properties(${owner} PROPERTIES POSITION_INDEPENDENT_CODE ${pic})
    target_link_libraries(${owner} PRIVATE ${fmt_link} coconet_warnings)
    if(tests)
      target_link_libraries(${owner} PRIVATE GTest::gtest)
      target_precompile_headers(${owner} PRIVATE ${COCONET_PCH_TEST_HEADERS})
    else()
      target_precompile_headers(${owner} PRIVATE ${COCONET_PCH_HEADERS})
    endif()
  endif()
  set(${out} ${owner} PARENT_SCOPE)
endfunction()

# A source with its own compile options (-ffp-contract=off, -mavx2, ...) or
# definitions compiles without the precompiled header, whose options it does
# not share (Clang refuses a header built with other definitions).
function(coconet_pch_skip_own_options target)
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  foreach(source IN LISTS sources)
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${dir})
    get_source_file_property(options ${source} TARGET_DIRECTORY ${target} COMPILE_OPTIONS)
    get_source_file_property(flags ${source} TARGET_DIRECTORY ${target} COMPILE_FLAGS)
    get_source_file_property(definitions ${source} TARGET_DIRECTORY ${target} COMPILE_DEFINITIONS)
    if(options OR flags OR definitions)
      set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()

# Gives every compiled C++ target of the project its unity setting and its
# precompiled header; called once all targets are defined.
function(coconet_apply_build_time)
  coconet_targets_under(${PROJECT_SOURCE_DIR} targets)
  if(COCONET_UNITY)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$"
         AND NOT target IN_LIST COCONET_UNITY_EXCLUDED)
        coconet_unity_batches(${target})
      endif()
    endforeach()
  endif()
  if(NOT COCONET_PCH)
    return()
  endif()
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE)$"
       OR target IN_LIST COCONET_PCH_EXCLUDED)
      continue()
    endif()
    coconet_pch_skip_own_options(${target})
    coconet_cxx_runs(${target} runs)
    if(runs EQUAL 0)
      continue()
    endif()
    get_target_property(links ${target} LINK_LIBRARIES)
    set(tests OFF)
    if(links MATCHES "GTest::")
      set(tests ON)
    endif()
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      set(pic OFF)
      get_target_property(target_pic ${target} POSITION_INDEPENDENT_CODE)
      if(target_pic OR type MATCHES "SHARED|MODULE")
        set(pic ON)
      endif()
      coconet_sees_fmt(${target} fmt)
      coconet_pch_owner(${pic} ${tests} ${fmt} owner)
      target_precompile_headers(${target} REUSE_FROM ${owner})
    elseif(runs GREATER 2)
      if(tests)
        target_precompile_headers(${target} PRIVATE ${COCONET_PCH_TEST_HEADERS})
      else()
        target_precompile_headers(${target} PRIVATE ${COCONET_PCH_HEADERS})
      endif()
    endif()
  endforeach()
endfunction()
