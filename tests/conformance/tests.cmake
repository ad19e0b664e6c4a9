# conformance: what rdma-core's own test suite (pyverbs, Debian's
# python3-pyverbs) checks.
#  - conformance_verbs_test: the suite's cases that failed on uroce, and the
#    features added for it, as GoogleTests in C (each fails on the code before
#    its fix), on uroce_lo (tests/fault/errors' harness, one process; a few
#    cases across processes with tests/support's);
#  - pyverbs_lo, pyverbs_netns: the installed suite itself (run_pyverbs.sh).
set(UROCE_CONFORMANCE_DIR ${CMAKE_CURRENT_LIST_DIR})

uroce_gtest(conformance_verbs_test LABEL conformance TIMEOUT 60 VERBS SOURCES
  ${PROJECT_SOURCE_DIR}/tests/fault/errors/fault_harness.cc
  ${UROCE_CONFORMANCE_DIR}/device_test.cc
  ${UROCE_CONFORMANCE_DIR}/ah_test.cc
  ${UROCE_CONFORMANCE_DIR}/cq_test.cc
  ${UROCE_CONFORMANCE_DIR}/mr_rereg_test.cc
  ${UROCE_CONFORMANCE_DIR}/qp_test.cc
  ${UROCE_CONFORMANCE_DIR}/dm_test.cc
  ${UROCE_CONFORMANCE_DIR}/odp_test.cc
  ${UROCE_CONFORMANCE_DIR}/odp_process_test.cc
  ${UROCE_CONFORMANCE_DIR}/parent_domain_test.cc
  ${UROCE_CONFORMANCE_DIR}/mw_test.cc
  ${UROCE_CONFORMANCE_DIR}/raw_test.cc
  ${UROCE_CONFORMANCE_DIR}/raw_pacing_test.cc
  ${UROCE_CONFORMANCE_DIR}/atomic_write_test.cc
  ${UROCE_CONFORMANCE_DIR}/recv_keys_test.cc
  ${UROCE_CONFORMANCE_DIR}/import_test.cc)
target_compile_definitions(conformance_verbs_test PRIVATE
  UROCE_FAULT_PEER_PATH="$<TARGET_FILE:fault_errors_peer>")
add_dependencies(conformance_verbs_test fault_errors_peer uroce)
# Cross-process cases use tests/support's harness (tests/CMakeLists.txt).
target_link_libraries(conformance_verbs_test PRIVATE uroce_verbs_harness)

# The same over the network link (UROCE_LINK=udp: RoCE v2 over UDP on
# 127.0.0.1 between the QPs of the one process).
uroce_gtest_variant(conformance_verbs_test udp LABEL conformance ENV UROCE_LINK=udp)
# `uroce stat` reads the raw QPs' counters (RawEthernet).
set_property(TEST conformance_verbs_test conformance_verbs_udp_test APPEND PROPERTY ENVIRONMENT
             "UROCE_TOOL=$<TARGET_FILE:uroce>")

# rdma-core's own suite, as Debian's python3-pyverbs installs it, with the
# build's library first on the loader path: on uroce_lo, and on a veth in a
# namespace of its own over the UDP link (root; see run_pyverbs.sh). Each
# fails unless 0 failed, 0 errors, at least 145 passed (kernel rxe passes 86;
# the suite's raw Ethernet cases run as root only, as CI does) and every
# skip is listed in docs/conformance.md. Also
# labelled debian: Debian's python3 loads the library, so not under ASan.
foreach(v lo netns)
  uroce_script_test(pyverbs_${v} LABEL conformance TIMEOUT 300
                    COMMAND bash ${UROCE_CONFORMANCE_DIR}/run_pyverbs.sh ${v} 145)
  set_property(TEST pyverbs_${v} APPEND PROPERTY LABELS debian)
  set_property(TEST pyverbs_${v} APPEND PROPERTY ENVIRONMENT "UROCE_TOOL=$<TARGET_FILE:uroce>")
endforeach()

# CAP_NET_RAW from a file capability (setcap), as a user's program gets it:
# allowed; the same program without it: refused (root, made ordinary for
# the runs). Not in the sanitizer tree (its binaries run with AT_SECURE).
if(NOT UROCE_SANITIZE)
  uroce_script_test(conformance_raw_setcap LABEL conformance TIMEOUT 60
                    COMMAND bash ${UROCE_CONFORMANCE_DIR}/raw_setcap.sh $<TARGET_FILE:conformance_verbs_test>)
endif()
