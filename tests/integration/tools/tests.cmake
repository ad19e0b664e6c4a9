# The operator's tool against live traffic (label integration): counters
# under the fault injector, the QP list, the device list.
uroce_gtest(tools_stat_test LABEL integration TIMEOUT 120 VERBS
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/stat_test.cc)
target_link_libraries(tools_stat_test PRIVATE uroce_verbs_harness)
add_dependencies(tools_stat_test uroce)
set_property(TEST tools_stat_test APPEND PROPERTY ENVIRONMENT UROCE_LINK=udp "UROCE_TOOL=$<TARGET_FILE:uroce>")
set_tests_properties(tools_stat_test PROPERTIES RESOURCE_LOCK uroce_udp_loopback)
