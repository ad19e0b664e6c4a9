# The UDP endpoint of the network link on loopback (label: integration).
# Ports: UROCE_TEST_PORT_BASE (tests/CMakeLists.txt) + 300..318.
math(EXPR UROCE_UDP_TEST_PORT "${UROCE_TEST_PORT_BASE} + 300")
uroce_gtest(udp_link_test LABEL integration TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/udp_link_test.cc)
set_property(TEST udp_link_test APPEND PROPERTY ENVIRONMENT
  "UROCE_TEST_UDP_PORT=${UROCE_UDP_TEST_PORT};UROCE_SHARED_WIRE=${PROJECT_SOURCE_DIR}/../shared/wire")
# The live capture on lo uses libpcap directly (the library only dlopens it).
target_link_libraries(udp_link_test PRIVATE PkgConfig::PCAP)
set_tests_properties(udp_link_test PROPERTIES RESOURCE_LOCK uroce_udp_loopback)

# Peers that are not uroce (a raw socket writes their IPv4 headers: root),
# with uroced's frame watcher run in the test's process; a sender whose
# datagrams are dropped on their way out, in a namespace of the test's own.
uroce_gtest(udp_foreign_peer_test LABEL integration TIMEOUT 60
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/foreign_peer_test.cc)
target_link_libraries(udp_foreign_peer_test PRIVATE uroce_daemon PkgConfig::PCAP)
set_tests_properties(udp_foreign_peer_test PROPERTIES RESOURCE_LOCK uroce_udp_loopback)
