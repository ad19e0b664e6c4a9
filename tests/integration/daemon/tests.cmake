# uroced's parts that talk to the network, in the test's process (label: integration).
uroce_gtest(daemon_linger_test LABEL integration TIMEOUT 30
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/linger_test.cc ${PROJECT_SOURCE_DIR}/src/daemon/linger.cc)
set_tests_properties(daemon_linger_test PROPERTIES RESOURCE_LOCK uroce_udp_loopback)
