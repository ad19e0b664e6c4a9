# Protocol tests (label: protocol): one transport role driven by crafted
# packets, assertions on what it writes, completes and answers.
uroce_gtest(protocol_rc_responder_test LABEL protocol TIMEOUT 30
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/rc_responder_test.cc)
uroce_gtest(protocol_rc_pair_test LABEL protocol TIMEOUT 120 SOURCES ${CMAKE_CURRENT_LIST_DIR}/rc_pair_test.cc)
uroce_gtest(protocol_rc_requester_test LABEL protocol TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/rc_requester_test.cc)
uroce_gtest(protocol_ud_responder_test LABEL protocol TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/ud_responder_test.cc)
foreach(t protocol_rc_responder_test protocol_rc_pair_test protocol_ud_responder_test)
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/tests)  # protocol/fake_receives.h
endforeach()
