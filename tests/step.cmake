# Tests of whole training steps (step/): model descriptions and their errors,
# the composition's properties, the layout search, Megatron-LM's Table 1.
add_executable(test_step ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step.cpp)
target_link_libraries(test_step PRIVATE coconet_step coconet_validation GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_step TEST_PREFIX "step." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
add_executable(test_step_trace ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step_trace.cpp)
target_link_libraries(test_step_trace PRIVATE coconet_step nlohmann_json::nlohmann_json GTest::gtest_main
                      coconet_warnings)
gtest_discover_tests(test_step_trace TEST_PREFIX "step." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
add_executable(test_step_models ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step_models.cpp)
target_link_libraries(test_step_models PRIVATE coconet_step yaml-cpp GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_step_models TEST_PREFIX "step." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
add_executable(test_step_layout ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step_layout.cpp)
target_link_libraries(test_step_layout PRIVATE coconet_step GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_step_layout TEST_PREFIX "step." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
# A model key's bad value through the command: exit 2, the file and line named.
if(TARGET coconet)
  add_test(NAME step.cli.bad_kv_heads_exits_2
           COMMAND sh -c "out=$($<TARGET_FILE:coconet> step llama3-70b --nodes 32 --set model.kv_heads=5 2>&1); \
rc=$?; echo \"$out\"; echo \"exit $rc\"")
  set_tests_properties(step.cli.bad_kv_heads_exits_2 PROPERTIES
                       PASS_REGULAR_EXPRESSION "llama3-70b.yaml:[0-9]+:[0-9]+: model.kv_heads = 5 does not divide model.heads = 64[^\n]*\nexit 2"
                       ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
  # A pair without layer programs (squared ReLU with RMSNorm): exit 2 at the
  # norm's line, naming the pairs that have programs.
  add_test(NAME step.cli.bad_family_pair_exits_2
           COMMAND sh -c "out=$($<TARGET_FILE:coconet> step nemotron4-340b --nodes 16 --set model.norm=rmsnorm 2>&1); \
rc=$?; echo \"$out\"; echo \"exit $rc\"")
  set_tests_properties(step.cli.bad_family_pair_exits_2 PROPERTIES
                       PASS_REGULAR_EXPRESSION "nemotron4-340b.yaml:[0-9]+:[0-9]+: model.ffn_type squared_relu with model.norm rmsnorm has no layer programs: coconet step prices gelu with layernorm \\(workloads/megatron_layer_\\*\\), swiglu with rmsnorm \\(workloads/llama_layer_\\*\\), squared_relu with layernorm \\(workloads/nemotron_layer_\\*\\)[^\n]*\nexit 2"
                       ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
  # The Nemotron family through the command: its programs, fused kernels and flash attention.
  add_test(NAME step.cli.nemotron_prices_its_programs
           COMMAND $<TARGET_FILE:coconet> step nemotron4-340b --topology dgx-h100 --nodes 16)
  set_tests_properties(step.cli.nemotron_prices_its_programs PROPERTIES
                       PASS_REGULAR_EXPRESSION "squared_relu, layernorm, embeddings untied; layer programs nemotron_layer_sp_fwd and nemotron_layer_sp_bwd\n# kernels: attention flash \\(forward and backward\\); element-wise fused kernels \\(forward and backward\\)"
                       ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
  # Multi-head latent attention through the command (DeepSeek-V3): its
  # programs and sizes in the header, the exposed all-to-all in the breakdown;
  # an MLA size without attention mla exits 2 at its line.
  add_test(NAME step.cli.mla_prices_its_programs
           COMMAND $<TARGET_FILE:coconet> step deepseek-v3 --topology dgx-h100 --nodes 128)
  set_tests_properties(step.cli.mla_prices_its_programs PROPERTIES
                       PASS_REGULAR_EXPRESSION "128 heads of 192 \\(q, k\\) and 128 \\(v\\), MLA latents q 1536 kv 512 \\+ rope 64, ffn 18432 swiglu, rmsnorm, embeddings untied; layer programs mla_layer_sp_fwd and mla_layer_sp_bwd\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n  exposed all-to-all \\(EP\\)"
                       ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
  add_test(NAME step.cli.mla_size_without_mla_exits_2
           COMMAND sh -c "out=$($<TARGET_FILE:coconet> step deepseek-v3 --nodes 128 --set model.attention=mha 2>&1); \
rc=$?; echo \"$out\"; echo \"exit $rc\"")
  set_tests_properties(step.cli.mla_size_without_mla_exits_2 PROPERTIES
                       PASS_REGULAR_EXPRESSION "deepseek-v3.yaml:[0-9]+:[0-9]+: model.q_lora_rank is a size of multi-head latent attention: it needs model.attention: mla[^\n]*\nexit 2"
                       ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
  # Impossible expert layouts through the command (issue 32): exit 2, the file and line named.
  foreach(case "ep_not_dividing_experts|--set parallel.ep=3|mixtral-8x7b.yaml:[0-9]+:[0-9]+: parallel.ep = 3 does not divide moe.experts = 8"
               "ep_not_fitting_a_stage|--set parallel.pp=8|mixtral-8x7b.yaml:[0-9]+:[0-9]+: ep x etp = 8 x 1 = 8 does not divide the 4 ranks of a pipeline stage"
               "top_k_above_experts|--set moe.top_k=9|mixtral-8x7b.yaml:[0-9]+:[0-9]+: moe.top_k = 9 is more than moe.experts = 8")
    string(REPLACE "|" ";" parts "${case}")
    list(GET parts 0 name)
    list(GET parts 1 set)
    list(GET parts 2 expect)
    add_test(NAME step.cli.moe_${name}_exits_2
             COMMAND sh -c "out=$($<TARGET_FILE:coconet> step mixtral-8x7b --nodes 4 ${set} 2>&1); \
rc=$?; echo \"$out\"; echo \"exit $rc\"")
    set_tests_properties(step.cli.moe_${name}_exits_2 PROPERTIES
                         PASS_REGULAR_EXPRESSION "${expect}[^\n]*\nexit 2"
                         ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
  endforeach()
endif()
# Kernel choices (model/kernel_fusion.h): fused kernels, flash attention, FP8 GEMMs.
add_executable(test_kernel_fusion ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_kernel_fusion.cpp)
target_link_libraries(test_kernel_fusion PRIVATE coconet_step GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_kernel_fusion TEST_PREFIX "sched." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
# Published steps held within tolerance (validation/reference/dgxc-h100.yaml).
add_executable(test_step_references ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step_references.cpp)
target_link_libraries(test_step_references PRIVATE coconet_step yaml-cpp GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_step_references TEST_PREFIX "step." DISCOVERY_TIMEOUT 120
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
# Mixtures of experts (issue 32): the moe section, expert parallelism, the
# MoE layer's pricing, memory and search.
add_executable(test_step_moe ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step_moe.cpp)
target_link_libraries(test_step_moe PRIVATE coconet_step GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_step_moe TEST_PREFIX "step." DISCOVERY_TIMEOUT 60
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
# Published MoE steps (validation/reference/moe-steps.yaml): Qwen3-235B-A22B on 256 H100.
add_executable(test_step_moe_references ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_step_moe_references.cpp)
target_link_libraries(test_step_moe_references PRIVATE coconet_step yaml-cpp GTest::gtest_main coconet_warnings)
gtest_discover_tests(test_step_moe_references TEST_PREFIX "step." DISCOVERY_TIMEOUT 120
                     PROPERTIES ENVIRONMENT "COCONET_ROOT=${COCONET_SOURCE_ROOT}")
