# The operator's tool against live traffic (label integration): counters
# under the fault injector, the QP list, the device list.
uroce_gtest(tools_stat_test LABEL integration TIMEOUT 120 VERBS
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/stat_test.cc)
target_link_libraries(tools_stat_test PRIVATE uroce_verbs_harness)
add_dependencies(tools_stat_test uroce)
set_property(TEST tools_stat_test APPEND PROPERTY ENVIRONMENT UROCE_LINK=udp "UROCE_TOOL=$<TARGET_FILE:uroce>")
set_tests_properties(tools_stat_test PROPERTIES RESOURCE_LOCK uroce_udp_loopback)
# uroce trace around an ibv_rc_pingpong pair over the UDP link (Debian's
# binaries: label debian too).
math(EXPR UROCE_TRACE_TEST_PORT "${UROCE_TEST_PORT_BASE} + 501")
uroce_script_test(tools_trace LABEL integration TIMEOUT 120
                  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/trace_test.sh $<TARGET_FILE:uroce> ${UROCE_TRACE_TEST_PORT})
set_property(TEST tools_trace APPEND PROPERTY LABELS debian)
set_tests_properties(tools_trace PROPERTIES RESOURCE_LOCK uroce_udp_loopback)
# uroce sysfs: a view of /sys/class with uroce's devices (root: a mount
# namespace), on uroce_lo here and on a namespace's device in netns_sysfs_view.
uroce_script_test(tools_sysfs_view LABEL integration TIMEOUT 60
                  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/sysfs_view_test.sh $<TARGET_FILE:uroce>)
