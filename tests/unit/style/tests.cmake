add_test(NAME style_format_check COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/format_check.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(style_format_check PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)
# The layers are build targets that cannot include upward, and the target
# graph is the acyclic one docs/architecture.md draws (configures a scratch
# tree: ~10 s).
add_test(NAME style_layers_test
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/layers_test.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/layers_test)
set_tests_properties(style_layers_test PROPERTIES LABELS unit TIMEOUT 120)
# The environment variables: the README's table (the one list) against the
# code's getenv names and defaults, the header's UROCE_ENV_* macros, and the
# man pages' ENVIRONMENT sections made from it (man/env_section.py).
add_test(NAME style_env_table_test COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/env_table_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(style_env_table_test PROPERTIES LABELS unit TIMEOUT 30)
# Clang's thread-safety analysis over the annotated sources (core, net,
# memory: docs/threads.md), with each file's own flags (~30 s).
add_test(NAME style_thread_safety
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/thread_safety_test.sh ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(style_thread_safety PROPERTIES LABELS unit TIMEOUT 300 SKIP_RETURN_CODE 77 PROCESSORS 2)
# Docs are a reference: no plan, no narrated history or dated log, and none
# of the false claims issue 30 corrected (each rule checks its own sample).
add_test(NAME style_docs_claims_test COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/docs_claims_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(style_docs_claims_test PROPERTIES LABELS unit TIMEOUT 30)
