# UCX and Open MPI on uroce, unmodified Debian 12 programs with their
# default settings: UCX 1.13's ucx_perftest (ucx-utils) over rc_verbs and
# ud_verbs, UCT and UCP, and mpirun (openmpi-bin 4.1) with --mca pml ucx
# running mpi_check.c (every element of a ping-pong, a streamed 1 MiB
# transfer, MPI_Allreduce and MPI_Alltoall checked), on one host and
# between two "hosts" (../netns/with_netns.sh; the RoCE v2 over UDP link).
# Labels: integration + ucx + debian (the sanitizer build excludes `debian`:
# these binaries are not instrumented), + netns for the two-host ones.
#
# Every test runs in private_dev.sh (root; 77 = skipped otherwise): UCX only
# uses a device whose /dev/infiniband/<dev_name> exists, and `uroce
# devnodes` makes the entries in the test's own /dev (docs/ucx.md).
#
# No UCX_* workaround variable anywhere. Which transports a test uses:
#  - UCT tests name theirs on the command line (-d DEVICE -x TRANSPORT).
#  - One host, UCP and MPI: UCX_TLS=rc_v (rc_verbs, with ud_verbs for
#    wire-up, as UCX's "rc_v" alias says) or UCX_TLS=ud_v. Without it UCX
#    reaches processes of its own host through shared memory (posix, cma)
#    and never through a NIC: the variable selects the transport under
#    test, it works around nothing. The only device is uroce_lo (`uroce
#    devnodes uroce_lo`), so no device is named to UCX.
#  - Two hosts: nothing is named (UCX picks rc_verbs on uroce_rnic0, the
#    device `uroce devnodes` gives an entry by itself), except in
#    netns_ucx_ucp_ud, which selects ud_verbs to test it between hosts as well;
#    the scripts check that the data went over uroce (nftables counters of
#    RoCE v2 datagrams; so on the UDP-socket link: AF_XDP frames pass no
#    netfilter hook).
#
# TCP ports of the one-host programs' own exchanges: UROCE_TEST_PORT_BASE +
# 400..449 (see ../debian/tests.cmake).
set(UROCE_UCX_DIR ${CMAKE_CURRENT_LIST_DIR})

# The MPI program, built with mpicc when it is there (libopenmpi-dev);
# without it the MPI tests skip.
find_program(UROCE_MPICC mpicc)
set(UROCE_MPI_CHECK "")
if(UROCE_MPICC)
  set(UROCE_MPI_CHECK ${CMAKE_BINARY_DIR}/bin/mpi_check)
  add_custom_command(OUTPUT ${UROCE_MPI_CHECK}
                     COMMAND ${UROCE_MPICC} -O2 -Wall -Wextra -Werror -o ${UROCE_MPI_CHECK}
                             ${UROCE_UCX_DIR}/mpi_check.c
                     DEPENDS ${UROCE_UCX_DIR}/mpi_check.c
                     COMMENT "mpicc mpi_check.c")
  add_custom_target(mpi_check ALL DEPENDS ${UROCE_MPI_CHECK})
endif()

# uroce_ucx_test(<name> <timeout s> NETNS|HOST <script> <args...>)
function(uroce_ucx_test name timeout where script)
  set(cmd bash ${UROCE_UCX_DIR}/private_dev.sh)
  if(where STREQUAL "NETNS")
    # UDP sockets: the scripts check with nftables counters that the data
    # went over uroce, and AF_XDP frames pass no netfilter hook.
    list(APPEND cmd bash ${UROCE_UCX_DIR}/../netns/with_netns.sh --link udp --)
  endif()
  uroce_script_test(${name} LABEL integration TIMEOUT ${timeout}
                    COMMAND ${cmd} bash ${UROCE_UCX_DIR}/${script} ${ARGN})
  set_property(TEST ${name} APPEND PROPERTY LABELS ucx debian)
  if(where STREQUAL "NETNS")
    set_property(TEST ${name} APPEND PROPERTY LABELS netns)
  endif()
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT
               "UROCE_CLI=$<TARGET_FILE:uroce>;MPI_CHECK=${UROCE_MPI_CHECK}")
  # Two busy-polling programs (four ranks for -np 4) on this machine's cores.
  set_tests_properties(${name} PROPERTIES PROCESSORS 2)
endfunction()

# The tool that makes the entries, in a directory of its own (no root needed).
# Not in the sanitizer tree, which does not build the `uroce` tool.
if(NOT UROCE_SANITIZE)
  uroce_script_test(uroce_devnodes LABEL integration TIMEOUT 60
                    COMMAND bash ${UROCE_UCX_DIR}/devnodes_test.sh)
  set_property(TEST uroce_devnodes APPEND PROPERTY LABELS ucx)
  set_property(TEST uroce_devnodes APPEND PROPERTY ENVIRONMENT "UROCE_CLI=$<TARGET_FILE:uroce>")
endif()

# The cases: UCT on a device and transport, UCP at 8 B and 64 KiB. Short
# runs (-w 100 warm-up iterations instead of 10,000): these check that UCX
# works, bench/ measures it.
function(uroce_uct_cases out dev tl)
  set(cases "-t am_lat -d ${dev} -x ${tl} -n 2000 -w 100" "-t am_bw -d ${dev} -x ${tl} -n 5000 -w 100")
  if(tl STREQUAL "rc_verbs")
    # (UCX 1.13's ud_verbs offers no put: "does not support operation put short".)
    list(APPEND cases "-t put_lat -d ${dev} -x ${tl} -n 2000 -w 100" "-t put_bw -d ${dev} -x ${tl} -n 5000 -w 100")
  endif()
  set(${out} ${cases} PARENT_SCOPE)
endfunction()
function(uroce_ucp_cases out tls)
  set(e "")
  if(tls)
    set(e "${tls} ")
  endif()
  set(${out}
      "${e}-t tag_lat -s 8 -n 2000 -w 100"
      "${e}-t tag_lat -s 65536 -n 200 -w 20"
      "${e}-t tag_bw -s 8 -n 5000 -w 100"
      "${e}-t tag_bw -s 65536 -n 500 -w 20"
      "${e}-t ucp_put_lat -s 8 -n 2000 -w 100"
      "${e}-t ucp_put_bw -s 65536 -n 500 -w 20"
      PARENT_SCOPE)
endfunction()

math(EXPR p "${UROCE_TEST_PORT_BASE} + 400")
uroce_uct_cases(c uroce_lo:1 rc_verbs)
uroce_ucx_test(ucx_uct_rc 300 HOST ucx_perftest.sh ${p} uroce_lo ${c})
math(EXPR p "${UROCE_TEST_PORT_BASE} + 401")
uroce_uct_cases(c uroce_lo:1 ud_verbs)
uroce_ucx_test(ucx_uct_ud 200 HOST ucx_perftest.sh ${p} uroce_lo ${c})
math(EXPR p "${UROCE_TEST_PORT_BASE} + 402")
uroce_ucp_cases(c UCX_TLS=rc_v)
uroce_ucx_test(ucx_ucp_rc 400 HOST ucx_perftest.sh ${p} uroce_lo ${c})
math(EXPR p "${UROCE_TEST_PORT_BASE} + 403")
uroce_ucp_cases(c UCX_TLS=ud_v)
uroce_ucx_test(ucx_ucp_ud 400 HOST ucx_perftest.sh ${p} uroce_lo ${c})
uroce_ucx_test(ucx_mpi_np2 200 HOST mpi_run.sh 2 UCX_TLS=rc_v)
uroce_ucx_test(ucx_mpi_np4 200 HOST mpi_run.sh 4 UCX_TLS=rc_v)
uroce_ucx_test(ucx_mpi_np2_ud 200 HOST mpi_run.sh 2 UCX_TLS=ud_v)

# Two hosts: each test has namespaces of its own, so one port for all.
set(p 18516)
uroce_uct_cases(c uroce_rnic0:1 rc_verbs)
uroce_ucx_test(netns_ucx_uct_rc 300 NETNS ucx_perftest.sh ${p} default ${c})
uroce_uct_cases(c uroce_rnic0:1 ud_verbs)
uroce_ucx_test(netns_ucx_uct_ud 200 NETNS ucx_perftest.sh ${p} default ${c})
uroce_ucp_cases(c "")
uroce_ucx_test(netns_ucx_ucp 400 NETNS ucx_perftest.sh ${p} default ${c})
uroce_ucp_cases(c UCX_TLS=ud_v)
uroce_ucx_test(netns_ucx_ucp_ud 400 NETNS ucx_perftest.sh ${p} default ${c})
uroce_ucx_test(netns_ucx_mpi_np2 200 NETNS mpi_run.sh 2)
uroce_ucx_test(netns_ucx_mpi_np4 200 NETNS mpi_run.sh 4)
