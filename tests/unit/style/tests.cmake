add_test(NAME style_format_check COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/format_check.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(style_format_check PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)
