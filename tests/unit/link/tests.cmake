# The network link's pure parts (src/link) without sockets.
uroce_gtest(link_id_trust_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/id_trust_test.cc)
uroce_gtest(link_fault_injector_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/fault_injector_test.cc)
