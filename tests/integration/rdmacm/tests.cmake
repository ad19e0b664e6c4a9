# rdmacm: the drop-in librdmacm.so.1.
# Its exported symbol set must equal Debian's librdmacm.so.1 (every
# name@RDMACM_1.x, the version chain, the SONAME); skips without it.
add_test(NAME rdmacm_exports_test
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/unit/verbs/exports_test.sh
                 $<TARGET_FILE:rdmacm> /usr/lib/x86_64-linux-gnu/librdmacm.so.1)
set_tests_properties(rdmacm_exports_test PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)

# GoogleTest programs over the drop-in library, each in a network namespace
# of its own (in_private_netns.sh): the API without a peer (api_test.cc),
# connections between ids of one host (connect_test.cc), rsockets between
# two threads (rsocket_test.cc).
foreach(t api connect rsocket)
  add_executable(rdmacm_${t}_test ${CMAKE_CURRENT_LIST_DIR}/${t}_test.cc)
  target_include_directories(rdmacm_${t}_test PRIVATE ${IBVERBS_INCLUDE_DIR} ${RDMACM_INCLUDE_DIR})
  target_link_libraries(rdmacm_${t}_test PRIVATE GTest::gtest GTest::gtest_main Threads::Threads rdmacm ibverbs)
  add_dependencies(rdmacm_${t}_test uroced)
  add_test(NAME rdmacm_${t}_test
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/in_private_netns.sh $<TARGET_FILE:rdmacm_${t}_test>)
  set_tests_properties(rdmacm_${t}_test PROPERTIES
    LABELS integration TIMEOUT 60 SKIP_RETURN_CODE 77
    # short CM timeouts: Connect.AListenerThatNeverAnswersEndsInUnreachable
    ENVIRONMENT "${UROCE_TEST_ENV_COMMON};UROCE_DAEMON_NAME=ctest-rdmacm_${t}_test;UROCE_CM_RESPONSE_TIMEOUT=14;UROCE_CM_RETRIES=2")
endforeach()

# Unmodified Debian programs, server and client on this host (127.0.0.1 on
# uroce_lo, or the address of in_private_netns.sh's interface d0), in a
# network namespace of their own.
function(uroce_cm_pair name)
  add_test(NAME rdmacm_${name}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/in_private_netns.sh
                   bash ${CMAKE_CURRENT_LIST_DIR}/run_cm_pair.sh ${ARGN})
  set_tests_properties(rdmacm_${name} PROPERTIES
    LABELS "integration;debian" TIMEOUT 90 SKIP_RETURN_CODE 77
    ENVIRONMENT "${UROCE_TEST_ENV_COMMON};UROCE_DAEMON_NAME=ctest-rdmacm_${name};LD_LIBRARY_PATH=$<TARGET_FILE_DIR:ibverbs>")
endfunction()
# rdmacm-utils
uroce_cm_pair(rping "rping -s -a 127.0.0.1 -C 100 -v" "rping -c -a 127.0.0.1 -C 100 -v" "ping data: rdma-ping-99")
uroce_cm_pair(rping_ipv6 "rping -s -a ::1 -C 10 -v" "rping -c -a ::1 -C 10 -v" "ping data: rdma-ping-9")
# -q: the programs move their own QPs (rdma_init_qp_attr, rdma_establish)
uroce_cm_pair(rping_q "rping -s -a 127.0.0.1 -C 20 -q" "rping -c -a 127.0.0.1 -C 20 -q")
uroce_cm_pair(ucmatose "ucmatose -c 10" "ucmatose -s 127.0.0.1 -c 10" "data transfers complete")
# -m: rdma_migrate_id to another channel
uroce_cm_pair(ucmatose_migrate "ucmatose -m" "ucmatose -m -s 127.0.0.1" "data transfers complete")
# the host's own address (uroce_d0), not the loopback
uroce_cm_pair(ucmatose_host_address "ucmatose -c 4 -C 20 -S 4096" "ucmatose -c 4 -C 20 -S 4096 -s 10.9.0.1" "data transfers complete")
uroce_cm_pair(rping_host_address "rping -s -a 10.9.0.1 -C 50 -v" "rping -c -a 10.9.0.1 -C 50 -v" "ping data: rdma-ping-49")
uroce_cm_pair(rdma_server "rdma_server" "rdma_client -s 127.0.0.1" "rdma_client: end 0")
uroce_cm_pair(rdma_xserver "rdma_xserver" "rdma_xclient -s 127.0.0.1" "rdma_xclient: end 0")
uroce_cm_pair(udaddy "udaddy" "udaddy -s 127.0.0.1" "data transfers complete")
uroce_cm_pair(mckey --wait-server "receiving data transfers" "mckey -m 239.1.1.1 -b 10.9.0.1" "mckey -m 239.1.1.1 -b 10.9.0.1 -s" "data transfers complete")
uroce_cm_pair(cmtime --server-stays "cmtime" "cmtime -s 127.0.0.1 -c 100" "destroy +:")
# qperf 0.4.11 with -cm1: its connections through the CM (its server never
# exits by itself; its test child ends a test at SIGALRM, which must interrupt
# ibv_get_cq_event with EINTR)
uroce_cm_pair(qperf --server-stays "qperf -lp 19765" "qperf -lp 19765 -cm1 127.0.0.1 -t 1 rc_bw rc_lat" "latency +=")
# libfabric 1.17's verbs provider (its connections go through the CM): fi_pingpong
# over MSG endpoints, and over RDM ones of ofi_rxm on top
uroce_cm_pair(libfabric_msg "fi_pingpong -p verbs -e msg -I 100" "fi_pingpong -p verbs -e msg -I 100 127.0.0.1" "^1m +100 +=100")
uroce_cm_pair(libfabric_rdm --rerun-on-teardown-race "fi_pingpong -p verbs\\;ofi_rxm -e rdm -I 100" "fi_pingpong -p verbs\\;ofi_rxm -e rdm -I 100 127.0.0.1" "^1m +100 +=100")
# perftest's -R: its connection through the CM
uroce_cm_pair(perftest_send_bw "ib_send_bw -R -n 1000" "ib_send_bw -R -n 1000 127.0.0.1" "BW average")
uroce_cm_pair(perftest_write_lat "ib_write_lat -R -n 1000" "ib_write_lat -R -n 1000 127.0.0.1" "t_avg")
uroce_cm_pair(perftest_send_lat_ud "ib_send_lat -R -c UD -n 1000" "ib_send_lat -R -c UD -n 1000 127.0.0.1" "t_avg")
uroce_cm_pair(perftest_write_bw_qp4 "ib_write_bw -R -q 4 -n 1000" "ib_write_bw -R -q 4 -n 1000 127.0.0.1" "BW average")
uroce_cm_pair(perftest_read_bw "ib_read_bw -R -n 1000" "ib_read_bw -R -n 1000 127.0.0.1" "BW average")
uroce_cm_pair(perftest_send_lat "ib_send_lat -R -n 1000" "ib_send_lat -R -n 1000 127.0.0.1" "t_avg")
uroce_cm_pair(perftest_read_lat "ib_read_lat -R -n 1000" "ib_read_lat -R -n 1000 127.0.0.1" "t_avg")
# rsockets: rdma-core's examples (-T v: the data checked; -T a: through rpoll),
# and plain TCP programs under Debian's librspreload.so (socat receiving what
# nc sends, checked: rsocket_copy.sh; iperf3)
set(RSPRELOAD LD_PRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so)
uroce_cm_pair(rstream "rstream -b 127.0.0.1 -T v" "rstream -s 127.0.0.1 -T v" "^1m_bw ")
uroce_cm_pair(rstream_async --rerun-on-hup "rstream -b 127.0.0.1 -T a -S 65536" "rstream -s 127.0.0.1 -T a -S 65536" "^custom +64k ")
uroce_cm_pair(rstream_host_address "rstream -b 10.9.0.1 -T v -S 4096" "rstream -s 10.9.0.1 -T v -S 4096" "^custom +4k ")
uroce_cm_pair(riostream "riostream -b 127.0.0.1" "riostream -s 127.0.0.1" "^1m_bw ")
uroce_cm_pair(rspreload_nc "bash ${CMAKE_CURRENT_LIST_DIR}/rsocket_copy.sh serve 127.0.0.1 5555"
              "bash ${CMAKE_CURRENT_LIST_DIR}/rsocket_copy.sh send 127.0.0.1 5555" "rsocket copy: intact")
uroce_cm_pair(rspreload_iperf3 "env ${RSPRELOAD} iperf3 -s -1 -B 127.0.0.1" "env ${RSPRELOAD} iperf3 -c 127.0.0.1 -n 64M" "receiver$")

# The same programs between two "hosts" (two network namespaces on a veth,
# each with its own uroced: ../netns/with_netns.sh): the CM's messages are
# MADs to QP1 on the wire (docs/cm.md). Every capture (both processes' and
# the veth's, which alone holds the CM's MADs) through roce_check.py and
# tshark. UROCE_CM_RESPONSE_TIMEOUT=16: a REQ that reaches the server's host
# before its uroced runs is sent again after 0.8 s, not 4.8 s.
# NO_CAPTURE first: a program that only connects (cmtime) leaves the
# processes' captures empty, which with_netns.sh counts as a failure; qperf
# sends for a whole second (~70,000 packets: checking them takes minutes).
function(uroce_cm_netns_pair name)
  set(args "${ARGN}")  # quoted, and no list(): an escaped ; (verbs\\;ofi_rxm) stays one word
  set(capture --capture)
  if(ARGV1 STREQUAL "NO_CAPTURE")
    string(REGEX REPLACE "^NO_CAPTURE;" "" args "${args}")
    set(capture)
  endif()
  add_test(NAME netns_cm_${name}
           COMMAND bash ${PROJECT_SOURCE_DIR}/tests/integration/netns/with_netns.sh ${capture} --
                   bash ${CMAKE_CURRENT_LIST_DIR}/run_cm_pair.sh ${args})
  set_tests_properties(netns_cm_${name} PROPERTIES
    LABELS "integration;debian;netns" TIMEOUT 120 SKIP_RETURN_CODE 77
    ENVIRONMENT "${UROCE_TEST_ENV_COMMON};UROCE_DAEMON_NAME=ctest-netns_cm_${name};LD_LIBRARY_PATH=$<TARGET_FILE_DIR:ibverbs>;UROCE_CM_RESPONSE_TIMEOUT=16")
endfunction()
set(S 10.77.0.1)
uroce_cm_netns_pair(rping "rping -s -a ${S} -C 100 -v" "rping -c -a ${S} -C 100 -v" "ping data: rdma-ping-99")
uroce_cm_netns_pair(rping_ipv6 "rping -s -a fd77::1 -C 10 -v" "rping -c -a fd77::1 -C 10 -v" "ping data: rdma-ping-9")
uroce_cm_netns_pair(rping_q "rping -s -a ${S} -C 20 -q" "rping -c -a ${S} -C 20 -q")
uroce_cm_netns_pair(ucmatose "ucmatose -c 4 -C 20" "ucmatose -c 4 -C 20 -s ${S}" "data transfers complete")
uroce_cm_netns_pair(udaddy "udaddy" "udaddy -s ${S}" "data transfers complete")
uroce_cm_netns_pair(rdma_server "rdma_server" "rdma_client -s ${S}" "rdma_client: end 0")
uroce_cm_netns_pair(rdma_xserver "rdma_xserver" "rdma_xclient -s ${S}" "rdma_xclient: end 0")
# multicast: the receiver joins 239.1.1.1 on S, the sender on C sends to it
uroce_cm_netns_pair(mckey --wait-server "receiving data transfers" "mckey -m 239.1.1.1 -b ${S}" "mckey -m 239.1.1.1 -b 10.77.0.2 -s" "data transfers complete")
uroce_cm_netns_pair(qperf NO_CAPTURE --server-stays "qperf -lp 19765" "qperf -lp 19765 -cm1 ${S} -t 1 rc_bw rc_lat" "latency +=")
uroce_cm_netns_pair(cmtime NO_CAPTURE --server-stays "cmtime -b ${S}" "cmtime -s ${S} -c 100" "destroy +:")
uroce_cm_netns_pair(perftest_send_bw --wait-server "Waiting for client" "ib_send_bw -R -s 4096 -n 200" "ib_send_bw -R -s 4096 -n 200 ${S}" "BW average")
uroce_cm_netns_pair(perftest_send_lat --wait-server "Waiting for client" "ib_send_lat -R -n 200" "ib_send_lat -R -n 200 ${S}" "t_avg")
uroce_cm_netns_pair(perftest_write_lat --wait-server "Waiting for client" "ib_write_lat -R -n 200" "ib_write_lat -R -n 200 ${S}" "t_avg")
uroce_cm_netns_pair(perftest_read_bw --wait-server "Waiting for client" "ib_read_bw -R -s 4096 -n 200" "ib_read_bw -R -s 4096 -n 200 ${S}" "BW average")
uroce_cm_netns_pair(perftest_write_bw --wait-server "Waiting for client" "ib_write_bw -R -s 4096 -n 200" "ib_write_bw -R -s 4096 -n 200 ${S}" "BW average")
uroce_cm_netns_pair(perftest_read_lat --wait-server "Waiting for client" "ib_read_lat -R -n 200" "ib_read_lat -R -n 200 ${S}" "t_avg")
uroce_cm_netns_pair(perftest_send_lat_ud --wait-server "Waiting for client" "ib_send_lat -R -c UD -n 200" "ib_send_lat -R -c UD -n 200 ${S}" "t_avg")
# libfabric's verbs provider: its server asks for no address ("localhost"
# inside the provider): a loopback bind takes no device, as the kernel's CM
# (docs/cm.md), and the provider then offers the devices' own addresses
uroce_cm_netns_pair(libfabric_msg "fi_pingpong -p verbs -e msg -S 4096 -I 200" "fi_pingpong -p verbs -e msg -S 4096 -I 200 ${S}" "^4k +200 +=200")
uroce_cm_netns_pair(libfabric_rdm --rerun-on-teardown-race "fi_pingpong -p verbs\\;ofi_rxm -e rdm -S 4096 -I 200" "fi_pingpong -p verbs\\;ofi_rxm -e rdm -S 4096 -I 200 ${S}" "^4k +200 +=200")
uroce_cm_netns_pair(rstream "rstream -b ${S} -T v -S 4096 -C 200" "rstream -s ${S} -T v -S 4096 -C 200" "^custom +4k ")
uroce_cm_netns_pair(riostream "riostream -b ${S} -S 4096 -C 200" "riostream -s ${S} -S 4096 -C 200" "^custom +4k ")
uroce_cm_netns_pair(rspreload_nc "bash ${CMAKE_CURRENT_LIST_DIR}/rsocket_copy.sh serve ${S} 5555"
                    "bash ${CMAKE_CURRENT_LIST_DIR}/rsocket_copy.sh send ${S} 5555" "rsocket copy: intact")
uroce_cm_netns_pair(rspreload_iperf3 "env ${RSPRELOAD} iperf3 -s -1 -B ${S}" "env ${RSPRELOAD} iperf3 -c ${S} -n 4M" "receiver$")
# The errors between hosts: no listener (REJ 8), no host (UNREACHABLE after
# the retries), the server's process killed (DISCONNECTED): wire_errors.sh.
add_test(NAME netns_cm_errors
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/integration/netns/with_netns.sh --
                 bash ${CMAKE_CURRENT_LIST_DIR}/wire_errors.sh)
set_tests_properties(netns_cm_errors PROPERTIES
  LABELS "integration;debian;netns;fault" TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "${UROCE_TEST_ENV_COMMON};UROCE_DAEMON_NAME=ctest-netns_cm_errors;LD_LIBRARY_PATH=$<TARGET_FILE_DIR:ibverbs>;UROCE_CM_RESPONSE_TIMEOUT=16")

# UCX 1.13's io_demo connecting through the CM (UCX_SOCKADDR_TLS_PRIORITY=rdmacm:
# no fallback to its TCP sockaddr transport), over uroce_lo's /dev/infiniband
# entry in a private /dev (../ucx/private_dev.sh).
add_test(NAME rdmacm_ucx_io_demo
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/in_private_netns.sh
                 bash ${PROJECT_SOURCE_DIR}/tests/integration/ucx/private_dev.sh
                 bash -c "$<TARGET_FILE:uroce> devnodes uroce_lo >/dev/null && exec bash ${CMAKE_CURRENT_LIST_DIR}/run_cm_pair.sh --server-stays 'io_demo -p 20000' 'io_demo -p 20000 -n 5 127.0.0.1' \"Client exit with status 'OK'\"")
set_tests_properties(rdmacm_ucx_io_demo PROPERTIES
  LABELS "integration;debian;ucx" TIMEOUT 90 SKIP_RETURN_CODE 77
  ENVIRONMENT "${UROCE_TEST_ENV_COMMON};UROCE_DAEMON_NAME=ctest-rdmacm_ucx_io_demo;LD_LIBRARY_PATH=$<TARGET_FILE_DIR:ibverbs>;UCX_SOCKADDR_TLS_PRIORITY=rdmacm")

# The same between two namespaces: the server's namespace's uroce_rnic0 gets
# the /dev/infiniband entry (one private /dev for both sides); every capture
# must hold UCX's RDMA traffic (RoCE v2 packets, checked).
add_test(NAME netns_cm_ucx_io_demo
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/integration/netns/with_netns.sh --capture --
                 bash ${PROJECT_SOURCE_DIR}/tests/integration/ucx/private_dev.sh
                 bash -c "ip netns exec \$UROCE_NETNS_SERVER $<TARGET_FILE:uroce> devnodes uroce_rnic0 >/dev/null && exec bash ${CMAKE_CURRENT_LIST_DIR}/run_cm_pair.sh --server-stays 'io_demo -p 20000' 'io_demo -p 20000 -n 5 10.77.0.1' \"Client exit with status 'OK'\"")
set_tests_properties(netns_cm_ucx_io_demo PROPERTIES
  LABELS "integration;debian;netns;ucx" TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "${UROCE_TEST_ENV_COMMON};UROCE_DAEMON_NAME=ctest-netns_cm_ucx_io_demo;LD_LIBRARY_PATH=$<TARGET_FILE_DIR:ibverbs>;UCX_SOCKADDR_TLS_PRIORITY=rdmacm;UROCE_CM_RESPONSE_TIMEOUT=16")
