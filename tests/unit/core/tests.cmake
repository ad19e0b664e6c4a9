uroce_gtest(core_qp_state_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/qp_state_test.cc)
