# Tests of the program model's front end: types, operators, parsing, inference,
# experiments, errors (and the exit code each error channel maps to), and that
# model/ includes nothing of the other folders.
add_executable(test_model_frontend
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_types.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_parse.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_experiment.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_ops.cpp
)
target_link_libraries(test_model_frontend PRIVATE coconet_model GTest::gtest_main coconet_warnings)
target_link_libraries(test_model_frontend PRIVATE coconet_test_paths)
gtest_discover_tests(test_model_frontend TEST_PREFIX "model.")

add_executable(test_model_errors
  ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_model_errors.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_exit_codes.cpp
)
target_link_libraries(test_model_errors PRIVATE coconet_model GTest::gtest_main coconet_warnings)
target_link_libraries(test_model_errors PRIVATE coconet_test_paths)
gtest_discover_tests(test_model_errors TEST_PREFIX "errors.")

add_test(NAME model.depends_on_nothing_else
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/model_depends_on_nothing.sh ${PROJECT_SOURCE_DIR})

# Hostile input (issue 14): every bound of model/limits.h, at the library boundary.
add_executable(test_hostile_model ${CMAKE_CURRENT_SOURCE_DIR}/errors/test_hostile_model.cpp)
target_link_libraries(test_hostile_model PRIVATE coconet_model coconet_plan coconet_sim GTest::gtest_main coconet_warnings)
target_link_libraries(test_hostile_model PRIVATE coconet_test_paths)
gtest_discover_tests(test_hostile_model TEST_PREFIX "errors.hostile." PROPERTIES TIMEOUT 120)
