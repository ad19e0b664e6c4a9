# Integration tier, unmodified Debian binaries (ibverbs-utils) on uroce's
# libibverbs.so.1, all on the loopback device uroce_lo with GID index 1
# (RoCE v2, ::ffff:127.0.0.1). Labels: integration + debian (the sanitizer
# build excludes `debian`: those binaries are not instrumented).
#
# Every pingpong pair needs a TCP port of its own for its address exchange,
# as tests run in parallel: UROCE_TEST_PORT_BASE (tests/CMakeLists.txt) + a
# per-test offset.

set(UROCE_DEBIAN_DIR ${CMAKE_CURRENT_LIST_DIR})
set(UROCE_DEBIAN_DEV -d uroce_lo -g 1)

# uroce_debian_test(<name> <script> <args...>)
function(uroce_debian_test name script)
  uroce_script_test(${name} LABEL integration TIMEOUT 90
                    COMMAND bash ${UROCE_DEBIAN_DIR}/${script} ${ARGN})
  set_property(TEST ${name} APPEND PROPERTY LABELS debian)
endfunction()

# uroce_debian_pair(<name> <port offset> <binary> <extra args...>)
function(uroce_debian_pair name offset binary)
  math(EXPR port "${UROCE_TEST_PORT_BASE} + ${offset}")
  uroce_debian_test(${name} run_pair.sh ${port} ${binary} ${UROCE_DEBIAN_DEV} ${ARGN})
endfunction()

uroce_debian_test(debian_ibv_devices devices.sh uroce_lo)
uroce_debian_test(debian_ibv_devinfo devinfo.sh uroce_lo)
uroce_debian_test(debian_ibv_asyncwatch asyncwatch.sh uroce_lo)

uroce_debian_pair(debian_rc_pingpong 0 ibv_rc_pingpong)
uroce_debian_pair(debian_rc_pingpong_chk 1 ibv_rc_pingpong -c)
uroce_debian_pair(debian_rc_pingpong_new_send 2 ibv_rc_pingpong -N)
uroce_debian_pair(debian_rc_pingpong_ts 3 ibv_rc_pingpong -t)
uroce_debian_pair(debian_rc_pingpong_events 4 ibv_rc_pingpong -e)
uroce_debian_pair(debian_rc_pingpong_64k 5 ibv_rc_pingpong -s 65536)
uroce_debian_pair(debian_rc_pingpong_10k_iters 6 ibv_rc_pingpong -n 10000)
uroce_debian_pair(debian_uc_pingpong 7 ibv_uc_pingpong)
uroce_debian_pair(debian_srq_pingpong 8 ibv_srq_pingpong)
uroce_debian_pair(debian_srq_pingpong_events 9 ibv_srq_pingpong -e)
# UD: the message size is the port's active MTU, read by the script.
math(EXPR UROCE_UD_PORT "${UROCE_TEST_PORT_BASE} + 10")
uroce_debian_test(debian_ud_pingpong_mtu ud_pingpong.sh ${UROCE_UD_PORT} uroce_lo 1)
# UD between two processes of this host over the network link
# (UROCE_LINK=udp): both QPs listen on 127.0.0.1:4791, Linux hands every
# datagram to one of the two sockets, and that process delivers the other's
# (net/ud_forward.h). Holds the lock of the tests that share that port.
uroce_debian_pair(debian_ud_pingpong_udp 13 ibv_ud_pingpong -c -n 1000)
set_property(TEST debian_ud_pingpong_udp APPEND PROPERTY ENVIRONMENT UROCE_LINK=udp)
set_tests_properties(debian_ud_pingpong_udp PROPERTIES RESOURCE_LOCK uroce_udp_loopback)

# XRC: one client, and a server with four client processes.
math(EXPR UROCE_XSRQ_PORT1 "${UROCE_TEST_PORT_BASE} + 11")
math(EXPR UROCE_XSRQ_PORT4 "${UROCE_TEST_PORT_BASE} + 12")
uroce_debian_test(debian_xsrq_pingpong xsrq_pingpong.sh ${UROCE_XSRQ_PORT1} 1 uroce_lo 1)
uroce_debian_test(debian_xsrq_pingpong_4_clients xsrq_pingpong.sh ${UROCE_XSRQ_PORT4} 4 uroce_lo 1)
