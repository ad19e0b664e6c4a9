uroce_gtest(common_containers_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/containers_test.cc)
