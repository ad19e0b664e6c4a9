# Multi-process data-path tests through the C verbs API (label: integration).
# Each binary gets its own uroced (see uroce_gtest); all of them together run
# in about a second.
#
# tests/support/verbs_harness.{h,cc} (fork a peer, socketpair, bounded CQ
# polling, shadowed buffers, the Agent) is the library uroce_verbs_harness
# (tests/CMakeLists.txt).

foreach(t harness rc_ops stopped_target uc_ud srq comp_channel post_send_ex atomic_stress shared_pages
          xrc_open_qp sqd mcast shared_flow qp_destroy small_send)
  uroce_gtest(verbs_ops_${t}_test LABEL integration TIMEOUT 60 VERBS
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}_test.cc)
  target_link_libraries(verbs_ops_${t}_test PRIVATE uroce_verbs_harness)
endforeach()

# The same data-path checks with shared pages off (UROCE_MR_SHARE=0): every
# byte then moves through process_vm_writev/readv, the universal fallback.
foreach(t rc_ops stopped_target srq atomic_stress)
  uroce_gtest_variant(verbs_ops_${t}_test vm LABEL integration ENV UROCE_MR_SHARE=0)
endforeach()

# Small SENDs through the usual delivery only (UROCE_EAGER=0: no one-line
# records, core/eager.h), for the operations and for the ordering tests.
foreach(t rc_ops small_send comp_channel)
  uroce_gtest_variant(verbs_ops_${t}_test noeager LABEL integration ENV UROCE_EAGER=0)
endforeach()

# Completion channels with the producers' fence instead of the consumers'
# membarrier (UROCE_CQ_FENCE=1: what a host without membarrier does).
uroce_gtest_variant(verbs_ops_comp_channel_test fence LABEL integration ENV UROCE_CQ_FENCE=1)

# The same checks over the network link (UROCE_LINK=udp: RoCE v2 over UDP on
# 127.0.0.1 between the processes). Not stopped_target (a stopped process
# cannot answer packets; only the intra-host link reaches its memory). The UD
# tests' two processes both listen on 127.0.0.1:4791; Linux gives each
# datagram to one of them, which delivers the other's (net/ud_forward.h).
foreach(t rc_ops srq comp_channel post_send_ex atomic_stress sqd uc_ud mcast xrc_open_qp shared_flow)
  uroce_gtest_variant(verbs_ops_${t}_test udp LABEL integration ENV UROCE_LINK=udp)
endforeach()

# IPv6 over the network link: GID 2 of uroce_lo is ::1 (the RC operations,
# and UD with its GRH holding the IPv6 header).
foreach(t rc_ops uc_ud)
  uroce_gtest_variant(verbs_ops_${t}_test udp6 LABEL integration ENV UROCE_LINK=udp UROCE_TEST_GID_INDEX=2)
endforeach()
