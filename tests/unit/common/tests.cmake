uroce_gtest(common_containers_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/containers_test.cc)
uroce_gtest(common_clock_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/clock_test.cc)
uroce_gtest(common_adaptive_lock_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/adaptive_lock_test.cc)
