uroce_gtest(memory_rings_test LABEL unit TIMEOUT 60 SOURCES ${CMAKE_CURRENT_LIST_DIR}/rings_test.cc)
uroce_gtest(memory_mr_backing_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/mr_backing_test.cc)
