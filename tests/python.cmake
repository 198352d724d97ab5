# The Python module (python/): tests/python/test_coconet.py compares each of
# its functions with the `coconet` command's --format json for the same
# arguments, its errors with the command's messages, and runs the README's
# one-liner and python/examples/sizes.py. Only when the module is built.
if(COCONET_HAVE_PYTHON AND TARGET coconet_python AND TARGET coconet)
  set(COCONET_PYTHON_ENV
    "PYTHONPATH=$<TARGET_FILE_DIR:coconet_python>"
    "COCONET_BINARY=$<TARGET_FILE:coconet>"
    "COCONET_ROOT=${COCONET_SOURCE_ROOT}"
    "COCONET_EXAMPLE=${PROJECT_SOURCE_DIR}/python/examples/sizes.py")
  add_test(NAME python.module
           COMMAND ${Python3_EXECUTABLE} -m unittest -v test_coconet
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/python)
  # The README's check, as written there.
  add_test(NAME python.readme
           COMMAND ${Python3_EXECUTABLE} -c "import coconet; print(coconet.predict('adam', topology='dgx-h100')[0])")
  set_tests_properties(python.module python.readme PROPERTIES ENVIRONMENT "${COCONET_PYTHON_ENV}" TIMEOUT 600)
  set_tests_properties(python.readme PROPERTIES PASS_REGULAR_EXPRESSION "'workload': 'adam'")
  # It predicts only: no MPI library, no CPU kernels (plan/ needs no kernels/).
  add_test(NAME python.links_alone
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/python_links_alone.sh $<TARGET_FILE:coconet_python>)
  set_tests_properties(python.links_alone PROPERTIES PASS_REGULAR_EXPRESSION "PASS")
endif()
