# Multi-host tier: unmodified Debian binaries (ibverbs-utils, perftest) on
# uroce's libibverbs.so.1 across two network namespaces joined by a veth
# pair, each "host" with its own uroced: every packet is RoCE v2 over UDP
# (docs/network-link.md). with_netns.sh builds and removes the namespaces
# and wraps the same pair scripts the single-host tests use
# (../debian/run_pair.sh, ../perftest/run_perftest.sh).
#
# Conditions: no loss (every packet of the pingpongs and of the latency
# tools captured by both sides and on the veth, and judged by roce_check.py
# and tshark); 1 % and 10 % loss from nftables rules in both namespaces;
# uroce's injector (drops, duplicates, reordering, corruption). The
# unreliable services (UC, UD) run without loss only: they promise nothing
# when packets go missing, and a pingpong whose message was lost waits for
# it forever, as it would on a NIC.
#
# Each test has namespaces of its own, so they all use TCP port 18515 for
# the programs' address exchange. Labels: integration + debian + netns, and
# fault for the lossy ones. Root only (77 = skipped otherwise).
set(UROCE_NETNS_DIR ${CMAKE_CURRENT_LIST_DIR})
set(UROCE_NETNS_PORT 18515)
set(UROCE_NETNS_INJECT "drop=0.02,dup=0.02,reorder=0.02,corrupt=0.02,seed=11")

# The with_netns.sh options of a lossy condition: loss1, loss10, inject.
function(uroce_netns_condition cond out)
  if(cond STREQUAL "loss1")
    set(${out} --loss 1 PARENT_SCOPE)
  elseif(cond STREQUAL "loss10")
    set(${out} --loss 10 PARENT_SCOPE)
  else()
    set(${out} --faults ${UROCE_NETNS_INJECT} PARENT_SCOPE)
  endif()
endfunction()

# uroce_netns_test(<name> <timeout s> <with_netns options...> -- <script> <args...>)
# The RC and UC QPs run on the AF_XDP link (with_netns.sh --link xdp, the
# default: docs/afxdp-link.md) in netns_<name>, and on UDP sockets in
# netns_<name>_udp; the nftables loss tests on UDP sockets only (AF_XDP
# frames pass no netfilter hook: the injector's tests lose them there).
function(uroce_netns_test name timeout)
  uroce_netns_register(netns_${name} ${timeout} ${ARGN})
  if(NOT ";${ARGN};" MATCHES ";--loss;|;--out-loss;")
    # --link udp among the options (before "--"; the last --link given wins)
    set(args ${ARGN})
    list(FIND args "--" sep)
    list(INSERT args ${sep} --link udp)
    uroce_netns_register(netns_${name}_udp ${timeout} ${args})
  endif()
endfunction()

function(uroce_netns_register test timeout)
  uroce_script_test(${test} LABEL integration TIMEOUT ${timeout}
                    COMMAND bash ${UROCE_NETNS_DIR}/with_netns.sh ${ARGN})
  set_property(TEST ${test} APPEND PROPERTY LABELS debian netns)
  if(";${ARGN};" MATCHES ";--loss;|;--out-loss;|;--faults;")
    set_property(TEST ${test} APPEND PROPERTY LABELS fault)
  endif()
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
               "UROCE_SHARED_WIRE=${PROJECT_SOURCE_DIR}/../shared/wire;RUN_PAIR_TIMEOUT_S=${timeout};PERFTEST_TIMEOUT_S=${timeout};UROCE_CLI=$<TARGET_FILE:uroce>")
  set_tests_properties(${test} PROPERTIES PROCESSORS 2)
endfunction()

set(pair bash ${UROCE_NETNS_DIR}/../debian/run_pair.sh ${UROCE_NETNS_PORT})
set(perf bash ${UROCE_NETNS_DIR}/../perftest/run_perftest.sh ${UROCE_NETNS_PORT})
set(pp_dev -d uroce_rnic0 -g 1 -c)
set(pt_dev -d uroce_rnic0 -x 1)

# rdma-core's examples, data checked by the programs (-c).
uroce_netns_test(rc_pingpong 60 --capture -- ${pair} ibv_rc_pingpong ${pp_dev} -n 200 -s 5000)
uroce_netns_test(uc_pingpong 60 --capture -- ${pair} ibv_uc_pingpong ${pp_dev} -n 200 -s 5000)
uroce_netns_test(ud_pingpong 60 --capture -- ${pair} ibv_ud_pingpong ${pp_dev} -n 200 -s 1000)
uroce_netns_test(srq_pingpong 60 --capture -- ${pair} ibv_srq_pingpong ${pp_dev} -n 200 -s 5000)
foreach(cond loss1 loss10 inject)
  uroce_netns_condition(${cond} opt)
  uroce_netns_test(rc_pingpong_${cond} 120 ${opt} -- ${pair} ibv_rc_pingpong ${pp_dev} -n 200 -s 5000)
  uroce_netns_test(srq_pingpong_${cond} 120 ${opt} -- ${pair} ibv_srq_pingpong ${pp_dev} -n 100 -s 5000)
endforeach()

# XRC (ibv_xsrq_pingpong): the server on one host, 2 clients on the other;
# at 10 % loss too. Captures through roce_check.py only: Debian 12's
# Wireshark does not decode XRC's headers.
set(xsrq bash ${UROCE_NETNS_DIR}/../debian/xsrq_pingpong.sh ${UROCE_NETNS_PORT} 2 uroce_rnic0 1)
# Two client processes on one host: the first on AF_XDP, the second on UDP
# sockets (--link auto: one process per interface has the AF_XDP socket).
uroce_netns_test(xsrq_pingpong 60 --link auto --capture --no-tshark -- ${xsrq})
uroce_netns_test(xsrq_pingpong_loss10 120 --loss 10 -- ${xsrq})

# IPv6 GIDs (docs/network-link.md, "IPv6"): the global address (GID 2) and
# the link-local one (GID 0, the default of many RoCE setups), captured;
# RC's reliability over IPv6 at 10 % loss.
set(pp_dev6 -d uroce_rnic0 -g 2 -c)
uroce_netns_test(rc_pingpong_ipv6 60 --capture -- ${pair} ibv_rc_pingpong ${pp_dev6} -n 200 -s 5000)
uroce_netns_test(rc_pingpong_link_local 60 --capture --
                 ${pair} ibv_rc_pingpong -d uroce_rnic0 -g 0 -c -n 200 -s 5000)
uroce_netns_test(ud_pingpong_ipv6 60 --capture -- ${pair} ibv_ud_pingpong ${pp_dev6} -n 200 -s 1000)
uroce_netns_test(write_bw_ipv6_loss10 120 --loss 10 -- ${perf} ib_write_bw -d uroce_rnic0 -x 2 -n 200)
# An interface with IPv6 addresses only gets a device too (GID 1 = fd77::x).
uroce_netns_test(rc_pingpong_ipv6_only 60 --capture --ipv6-only --
                 ${pair} ibv_rc_pingpong -d uroce_rnic0 -g 1 -c -n 200 -s 5000)

# perftest: every RC tool.
foreach(tool send write read atomic)
  uroce_netns_test(${tool}_lat 60 --capture -- ${perf} ib_${tool}_lat ${pt_dev} -n 500)
  uroce_netns_test(${tool}_bw 60 -- ${perf} ib_${tool}_bw ${pt_dev} -n 1000)
  foreach(cond loss1 loss10 inject)
    uroce_netns_condition(${cond} opt)
    uroce_netns_test(${tool}_lat_${cond} 120 ${opt} -- ${perf} ib_${tool}_lat ${pt_dev} -n 200)
    uroce_netns_test(${tool}_bw_${cond} 120 ${opt} -- ${perf} ib_${tool}_bw ${pt_dev} -n 200)
  endforeach()
endforeach()

# With -e both sides sleep on one completion channel for both CQs and poll
# the CQ they expect once per event: when a reply and the ACK of the request
# it answers arrive together, both completions must be there when the
# application wakes (memory/notify.h, NotifyBatch).
uroce_netns_test(send_lat_events 60 -- ${perf} ib_send_lat ${pt_dev} -e -n 2000)

# Datagrams dropped on their way out (nftables output hook): each used an
# IPv4 identification, yet every packet on the veth must carry the right
# ICRC (docs/network-link.md, "The IPv4 identification"); captured and
# judged by the checkers. READ responses leave in GSO sends.
uroce_netns_test(send_lat_outloss3 120 --out-loss 3 --capture -- ${perf} ib_send_lat ${pt_dev} -n 300)
uroce_netns_test(read_bw_outloss3 120 --out-loss 3 --capture -- ${perf} ib_read_bw ${pt_dev} -n 400 -s 4096)

# The AF_XDP link's lending (docs/afxdp-link.md): a process killed while it
# holds the interface gives it back to the next; without the privileges
# (everything as user nobody) the UDP-socket link serves, one line says why.
uroce_netns_register(netns_xdp_reclaim 90 -- bash ${UROCE_NETNS_DIR}/xdp_reclaim.sh ${UROCE_NETNS_PORT})
uroce_netns_register(netns_xdp_noprivs 60 -- bash ${UROCE_NETNS_DIR}/xdp_noprivs.sh ${UROCE_NETNS_PORT})

# UD multicast across the hosts (ibv_attach_mcast; no Debian program uses it
# without a subnet manager): mcast_peer is a plain verbs program on uroce's
# library; two members on one host, one on the sender's, veth captured.
add_executable(mcast_peer ${CMAKE_CURRENT_LIST_DIR}/mcast_peer.cc)
target_include_directories(mcast_peer PRIVATE ${IBVERBS_INCLUDE_DIR})
target_link_libraries(mcast_peer PRIVATE ibverbs)
if(UROCE_SANITIZE)
  set_target_properties(mcast_peer PROPERTIES EXCLUDE_FROM_ALL ON)  # for `debian` tests only
endif()
uroce_netns_test(ud_multicast 60 --capture -- bash ${UROCE_NETNS_DIR}/mcast_pair.sh $<TARGET_FILE:mcast_peer>)

# Incast (correctness, not speed): two senders' checked pingpongs at once
# through one bridge port shaped by tbf with a small queue (bench/incast.py's
# topology), on UDP sockets and on AF_XDP.
uroce_script_test(netns_incast_smoke LABEL integration TIMEOUT 180
                  COMMAND python3 ${UROCE_NETNS_DIR}/incast_smoke.py ${CMAKE_BINARY_DIR} ${UROCE_NETNS_PORT})
set_property(TEST netns_incast_smoke APPEND PROPERTY LABELS netns debian fault)
set_tests_properties(netns_incast_smoke PROPERTIES PROCESSORS 2)

# Raw Ethernet (docs/raw-ethernet.md): perftest's raw_ethernet_* tools between
# the two namespaces, on the AF_XDP link only (frames from the wire reach a
# raw QP through it), and a raw frame to a plain UDP socket of the peer.
foreach(c bw mcast lat burst fs_rate kernel)
  uroce_netns_register(netns_raw_${c} 90 -- bash ${UROCE_NETNS_DIR}/../raw/run_raw.sh ${c})
endforeach()

# uroce sysfs in a namespace: uroce_rnic0's device/net/rnic0 is the interface.
uroce_netns_register(netns_sysfs_view 60 -- bash ${UROCE_NETNS_DIR}/../tools/sysfs_view_test.sh $<TARGET_FILE:uroce>)
