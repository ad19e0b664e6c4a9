uroce_gtest(transport_packetizer_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/packetizer_test.cc)
