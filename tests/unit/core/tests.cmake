uroce_gtest(core_qp_state_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/qp_state_test.cc)
uroce_gtest(core_rings_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/rings_test.cc)
uroce_gtest(core_mr_backing_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/mr_backing_test.cc)
