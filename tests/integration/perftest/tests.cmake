# Integration tier, perftest 4.5 (Debian package perftest) unmodified on
# uroce's libibverbs.so.1: every tool (ib_{send,write,read,atomic}_{lat,bw})
# and its modes, server and client on the loopback device uroce_lo with GID
# index 1 (RoCE v2, ::ffff:127.0.0.1). run_perftest.sh runs a pair and checks
# exit codes and the result tables. Labels: integration + debian (the
# sanitizer build excludes `debian`: those binaries are not instrumented).
#
# Every pair needs a TCP port of its own for perftest's address exchange, as
# tests run in parallel: UROCE_TEST_PORT_BASE + 100 + a per-test offset
# (tests/integration/debian uses UROCE_TEST_PORT_BASE + 0..99): two checkouts
# testing at once on one host need bases at least 200 apart.
#
# Short runs: -n 1000 (-n 100 for -a on bandwidth, -n 20 for -a on latency,
# whose ping-pong costs up to a scheduler tick per round trip when the two
# CPUs are shared), -D 2 in duration mode.
set(UROCE_PERFTEST_DIR ${CMAKE_CURRENT_LIST_DIR})
set(UROCE_PERFTEST_DEV -d uroce_lo -x 1)

# uroce_perftest(<name> <port offset> [SLOW] [--pair|--infinite|--loopback] <tool> <args...>)
# run_perftest.sh gives the pair 60 s (SLOW: 150 s), CTest 30 s more.
function(uroce_perftest name offset)
  math(EXPR port "${UROCE_TEST_PORT_BASE} + 100 + ${offset}")
  set(rest ${ARGN})
  set(limit 60)
  list(GET rest 0 first)
  if(first STREQUAL "SLOW")
    set(limit 150)
    list(POP_FRONT rest)
  endif()
  set(mode --pair)
  list(GET rest 0 first)
  if(first MATCHES "^--")
    set(mode ${first})
    list(POP_FRONT rest)
  endif()
  list(POP_FRONT rest tool)
  math(EXPR timeout "${limit} + 30")
  uroce_script_test(perftest_${name} LABEL integration TIMEOUT ${timeout}
                    COMMAND bash ${UROCE_PERFTEST_DIR}/run_perftest.sh ${mode} ${port}
                            ${tool} ${UROCE_PERFTEST_DEV} ${rest})
  set_property(TEST perftest_${name} APPEND PROPERTY ENVIRONMENT PERFTEST_TIMEOUT_S=${limit})
  # Each test keeps two processes busy-polling: with PROCESSORS 2, `ctest -jN`
  # counts it as two CPUs and does not overcommit the machine with them.
  set_tests_properties(perftest_${name} PROPERTIES PROCESSORS 2)
  set_property(TEST perftest_${name} APPEND PROPERTY LABELS debian)
endfunction()

# Every tool, default RC, and the other transports each tool accepts
# (send: RC/UC/UD; write: RC/UC; read and atomic: RC only). Unreliable
# send_bw runs at most as many messages as the server pre-posts receives
# (its default rx depth, 512): a SEND that finds no receive is dropped on UC/UD
# (as on a real NIC), and perftest's server would wait for it for 120 s.
uroce_perftest(send_lat 0 ib_send_lat -n 1000)
uroce_perftest(send_lat_uc 1 ib_send_lat -n 1000 -c UC)
uroce_perftest(send_lat_ud 2 ib_send_lat -n 1000 -c UD)
uroce_perftest(send_bw 3 ib_send_bw -n 1000)
uroce_perftest(send_bw_uc 4 ib_send_bw -n 500 -c UC)
uroce_perftest(send_bw_ud 5 ib_send_bw -n 500 -c UD)
uroce_perftest(write_lat 6 ib_write_lat -n 1000)
uroce_perftest(write_lat_uc 7 ib_write_lat -n 1000 -c UC)
uroce_perftest(write_bw 8 ib_write_bw -n 1000)
uroce_perftest(write_bw_uc 9 ib_write_bw -n 1000 -c UC)
uroce_perftest(read_lat 10 ib_read_lat -n 1000)
uroce_perftest(read_bw 11 ib_read_bw -n 1000)
uroce_perftest(atomic_lat 12 ib_atomic_lat -n 1000)
uroce_perftest(atomic_bw 13 ib_atomic_bw -n 1000)
uroce_perftest(atomic_lat_cas 14 ib_atomic_lat -n 1000 -A CMP_AND_SWAP)
uroce_perftest(atomic_bw_cas 15 ib_atomic_bw -n 1000 -A CMP_AND_SWAP)

# XRC (-c XRC: perftest accepts it for every tool): an XRC domain and XRC SRQ
# per side; XRC initiator QPs send to XRC target QPs (bandwidth tools: the
# client's initiators to the server's targets; latency tools: both ways).
uroce_perftest(send_lat_xrc 58 ib_send_lat -n 1000 -c XRC)
uroce_perftest(send_bw_xrc 59 ib_send_bw -n 1000 -c XRC)
uroce_perftest(write_lat_xrc 60 ib_write_lat -n 1000 -c XRC)
uroce_perftest(write_bw_xrc 61 ib_write_bw -n 1000 -c XRC)
uroce_perftest(read_lat_xrc 62 ib_read_lat -n 1000 -c XRC)
uroce_perftest(read_bw_xrc 63 ib_read_bw -n 1000 -c XRC)
uroce_perftest(atomic_lat_xrc 64 ib_atomic_lat -n 1000 -c XRC)
uroce_perftest(atomic_bw_xrc 65 ib_atomic_bw -n 1000 -c XRC)

# -a: every size from 2 B to 8 MiB (atomics have a fixed size: no -a).
# Whatever -n, perftest spends ~0.22 s per size and side sampling the CPU
# clock for its report (get_cpu_mhz, twice per size in the latency tools), and
# a ping-pong slows to a scheduler tick per round trip when other work shares
# the two CPUs: the latency runs are SLOW (53 s measured with two CPU hogs).
uroce_perftest(send_bw_all 16 ib_send_bw -a -n 100)
uroce_perftest(write_bw_all 17 ib_write_bw -a -n 100)
uroce_perftest(read_bw_all 18 ib_read_bw -a -n 100)
uroce_perftest(send_lat_all 19 SLOW ib_send_lat -a -n 20)
uroce_perftest(write_lat_all 20 SLOW ib_write_lat -a -n 20)

# -q 8: eight QPs per side.
uroce_perftest(send_bw_qp8 21 ib_send_bw -n 1000 -q 8)
uroce_perftest(write_bw_qp8 22 ib_write_bw -n 1000 -q 8)
uroce_perftest(read_bw_qp8 23 ib_read_bw -n 1000 -q 8)
uroce_perftest(atomic_bw_qp8 24 ib_atomic_bw -n 1000 -q 8)

# -b: bidirectional.
uroce_perftest(send_bw_bidir 25 ib_send_bw -n 1000 -b)
uroce_perftest(write_bw_bidir 26 ib_write_bw -n 1000 -b)
uroce_perftest(read_bw_bidir 27 ib_read_bw -n 1000 -b)

# -e: sleep on completion channel events (perftest refuses -e for the write tools).
uroce_perftest(send_lat_events 28 ib_send_lat -n 1000 -e)
uroce_perftest(send_bw_events 29 ib_send_bw -n 1000 -e)
uroce_perftest(read_lat_events 30 ib_read_lat -n 1000 -e)
uroce_perftest(read_bw_events 31 ib_read_bw -n 1000 -e)
uroce_perftest(atomic_lat_events 32 ib_atomic_lat -n 1000 -e)
uroce_perftest(atomic_bw_events 33 ib_atomic_bw -n 1000 -e)

# -l 8: post lists of 8 work requests.
uroce_perftest(send_bw_postlist 34 ib_send_bw -n 1000 -l 8)
uroce_perftest(write_bw_postlist 35 ib_write_bw -n 1000 -l 8)
uroce_perftest(read_bw_postlist 36 ib_read_bw -n 1000 -l 8)
uroce_perftest(atomic_bw_postlist 37 ib_atomic_bw -n 1000 -l 8)

# -I: inline sizes. perftest 4.5 enables inline only on devices it knows by
# vendor part id (Mellanox, Chelsio, ...): on uroce, as on rxe, it prints
# "Device not recognized to implement inline feature. Disabling it" and
# runs without IBV_SEND_INLINE. Kept: the option must not break the run.
uroce_perftest(send_lat_inline 38 ib_send_lat -n 1000 -I 64 -s 32)
uroce_perftest(write_lat_inline 39 ib_write_lat -n 1000 -I 64 -s 32)
uroce_perftest(send_bw_inline 40 ib_send_bw -n 1000 -I 64 -s 32)

# --report_gbits: Gb/s instead of MB/s.
uroce_perftest(send_bw_gbits 41 ib_send_bw -n 1000 --report_gbits)
uroce_perftest(write_bw_gbits 42 ib_write_bw -n 1000 --report_gbits)
uroce_perftest(read_bw_gbits 43 ib_read_bw -n 1000 --report_gbits)

# -D 2: duration mode, every tool.
uroce_perftest(send_lat_duration 44 ib_send_lat -D 2)
uroce_perftest(send_bw_duration 45 ib_send_bw -D 2)
uroce_perftest(write_lat_duration 46 ib_write_lat -D 2)
uroce_perftest(write_bw_duration 47 ib_write_bw -D 2)
uroce_perftest(read_lat_duration 48 ib_read_lat -D 2)
uroce_perftest(read_bw_duration 49 ib_read_bw -D 2)
uroce_perftest(atomic_lat_duration 50 ib_atomic_lat -D 2)
uroce_perftest(atomic_bw_duration 51 ib_atomic_bw -D 2)

# --run_infinitely (bandwidth tools only), one result line per second,
# stopped with SIGINT after two.
uroce_perftest(send_bw_infinite 52 --infinite ib_send_bw -D 1)
uroce_perftest(write_bw_infinite 53 --infinite ib_write_bw -D 1)
uroce_perftest(read_bw_infinite 54 --infinite ib_read_bw -D 1)
uroce_perftest(atomic_bw_infinite 55 --infinite ib_atomic_bw -D 1)

# Debian's run_perftest_loopback script (server on CPU 0, client on CPU 1).
uroce_perftest(loopback_write_bw 56 --loopback ib_write_bw -n 1000)
uroce_perftest(loopback_send_lat 57 --loopback ib_send_lat -n 1000)
