# fault/errors: bad input gets a clear error, nothing is lost (C verbs API).
# Two executables: the daemon-death test kills its uroced, so it must not
# share a process (or a daemon) with anything else.

# The forked peer of the process-death tests: a plain verbs program, exec'd by
# the tests so it starts with a clean library and its own uroced connection.
add_executable(fault_errors_peer ${CMAKE_CURRENT_LIST_DIR}/peer_main.cc)
# (It reads contract/shm_layout.h to corrupt its own segment: corrupt_segment_test.cc.)
target_include_directories(fault_errors_peer PRIVATE ${IBVERBS_INCLUDE_DIR} ${PROJECT_SOURCE_DIR}/tests
                                                   ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(fault_errors_peer PRIVATE ibverbs)

set(UROCE_FAULT_ERRORS_DIR ${CMAKE_CURRENT_LIST_DIR})

uroce_gtest(fault_errors_test LABEL fault TIMEOUT 60 VERBS SOURCES
  ${UROCE_FAULT_ERRORS_DIR}/fault_harness.cc
  ${UROCE_FAULT_ERRORS_DIR}/local_protection_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/remote_access_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/cached_target_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/length_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/rnr_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/modify_qp_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/queue_depth_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/flush_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/peer_death_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/corrupt_segment_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/busy_destroy_test.cc
  ${UROCE_FAULT_ERRORS_DIR}/unsupported_test.cc)

uroce_gtest(fault_errors_daemon_death_test LABEL fault TIMEOUT 30 VERBS SOURCES
  ${UROCE_FAULT_ERRORS_DIR}/fault_harness.cc
  ${UROCE_FAULT_ERRORS_DIR}/daemon_death_test.cc)

# Stops its uroced for a while: a daemon (and a process) of its own too.
uroce_gtest(fault_errors_lock_wait_test LABEL fault TIMEOUT 30 VERBS SOURCES
  ${UROCE_FAULT_ERRORS_DIR}/fault_harness.cc
  ${UROCE_FAULT_ERRORS_DIR}/lock_wait_test.cc)

# Plays a uroced that leaves without answering: a daemon name of its own too.
uroce_gtest(fault_errors_daemon_race_test LABEL fault TIMEOUT 30 VERBS SOURCES
  ${UROCE_FAULT_ERRORS_DIR}/fault_harness.cc
  ${UROCE_FAULT_ERRORS_DIR}/daemon_race_test.cc)

# corrupt_segment_test.cc scribbles over its own segment (scribble.h reads contract/shm_layout.h).
target_include_directories(fault_errors_test PRIVATE ${PROJECT_SOURCE_DIR}/src)

foreach(t fault_errors_test fault_errors_daemon_death_test fault_errors_lock_wait_test fault_errors_daemon_race_test)
  target_compile_definitions(${t} PRIVATE UROCE_FAULT_PEER_PATH="$<TARGET_FILE:fault_errors_peer>")
  add_dependencies(${t} fault_errors_peer)
endforeach()

# Every error path again over the network link (UROCE_LINK=udp: RoCE v2 over
# UDP on 127.0.0.1): bad keys, lengths, RNR, flushes, dead peers (a vanished
# peer is RETRY_EXC_ERR after the retry budget, as on a wire).
uroce_gtest_variant(fault_errors_test udp LABEL fault ENV UROCE_LINK=udp)
