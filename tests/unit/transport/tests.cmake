uroce_gtest(transport_packetizer_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/packetizer_test.cc)
uroce_gtest(transport_timers_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/timers_test.cc)
uroce_gtest(transport_congestion_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/congestion_test.cc)
