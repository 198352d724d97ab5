# The figures the README and docs/ quote from the model (marked there:
# scripts/docs_figures.py): docs.figures fails when one no longer matches what
# the built `coconet` prints; `make docs` rewrites them.
find_program(COCONET_PYTHON3 NAMES python3)
if(TARGET coconet AND COCONET_PYTHON3)
  add_test(NAME docs.figures
           COMMAND ${COCONET_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/docs_figures.py
                   --coconet $<TARGET_FILE:coconet> --check)
  set_tests_properties(docs.figures PROPERTIES TIMEOUT 300)
endif()
if(TARGET coconet AND COCONET_PYTHON3)
  # The check can fail: a fixture whose figure is wrong is named.
  add_test(NAME docs.figures_stale_is_caught
           COMMAND ${COCONET_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/docs_figures.py
                   --coconet $<TARGET_FILE:coconet> --check --root ${CMAKE_CURRENT_SOURCE_DIR}/docs_stale)
  set_tests_properties(docs.figures_stale_is_caught PROPERTIES TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "README.md:4: figure ref.megatron-1.7b.tflops says 999.9, the tool prints [0-9]")
endif()
