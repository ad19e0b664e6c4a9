# uroced's parts that talk to the network, in the test's process (label: integration).
uroce_gtest(daemon_linger_test LABEL integration TIMEOUT 30
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/linger_test.cc)
target_link_libraries(daemon_linger_test PRIVATE uroce_daemon)
set_tests_properties(daemon_linger_test PROPERTIES RESOURCE_LOCK uroce_udp_loopback)
# The registry of QP numbers and its shared directory (label: unit: no daemon, no sockets).
uroce_gtest(daemon_registry_test LABEL unit TIMEOUT 30
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/registry_test.cc)
target_link_libraries(daemon_registry_test PRIVATE uroce_daemon)
