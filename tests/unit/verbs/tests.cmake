# verbs: the exported symbol set of the drop-in libibverbs.so.1 must equal the
# system libibverbs.so.1's (every name@VERSION, the version chain, the SONAME).
# Skips (exit 77) where the system library or readelf is not installed.
add_test(NAME verbs_exports_test
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/exports_test.sh
                 $<TARGET_FILE:ibverbs>)
set_tests_properties(verbs_exports_test PROPERTIES
  LABELS unit
  TIMEOUT 60
  SKIP_RETURN_CODE 77)

uroce_gtest(verbs_abi_layout_test LABEL unit TIMEOUT 30 VERBS SOURCES ${CMAKE_CURRENT_LIST_DIR}/abi_layout_test.cc)
