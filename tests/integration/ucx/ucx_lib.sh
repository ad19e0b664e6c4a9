#!/usr/bin/env bash
# Shared by the UCX and Open MPI tests (source it; it sources ../proc_lib.sh).
#
#   ucx_require TOOL...  exits 77 with one line when a tool is missing
#   devnodes ARGS...     `uroce devnodes ARGS` (the build's tool, $UROCE_CLI)
#   two_hosts            true inside with_netns.sh
#   host_argv s|c        sets the array `host` to the argv prefix that runs a
#                        command as "host" s (server) or c (client) of
#                        with_netns.sh: in that side's network namespace and
#                        in IPC, PID, UTS (hostname hosts / hostc) and mount
#                        namespaces of its own. UCX then takes the two sides
#                        for two machines, as a real pair of hosts: its
#                        shared-memory transports reach only processes of
#                        their own IPC (posix, sysv) and PID (cma) namespace,
#                        so between the sides only the network is left.
#                        Started with `"${host[@]}" CMD &`, $! is a process
#                        in that network namespace (for `listening`), and
#                        killing it ends the "host" (its PID 1 and with it
#                        every process in its PID namespace, uroced included).
#   roce_count_start     nftables counters, in both namespaces, of the RoCE v2
#                        datagrams (UDP 4791) each side receives
#   roce_received s|c    "PACKETS BYTES" side s or c received so far
# shellcheck source=../proc_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../proc_lib.sh"

ucx_require() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 && continue
    case $t in
      ucx_perftest) echo "SKIP: ucx_perftest not installed (Debian package ucx-utils; scripts/setup.sh)" ;;
      mpirun) echo "SKIP: mpirun not installed (Debian package openmpi-bin; scripts/setup.sh)" ;;
      *) echo "SKIP: $t not installed (scripts/setup.sh)" ;;
    esac
    exit 77
  done
}

devnodes() { "${UROCE_CLI:?UROCE_CLI: the uroce tool (set by CTest)}" devnodes "$@"; }

two_hosts() { [[ -n ${UROCE_NETNS_SERVER-} ]]; }

host_argv() {
  local ns
  ns=$([[ $1 == s ]] && echo "$UROCE_NETNS_SERVER" || echo "$UROCE_NETNS_CLIENT")
  # shellcheck disable=SC2016 # for the inner shell
  host=(ip netns exec "$ns" unshare --ipc --pid --uts --mount-proc --fork --kill-child
    bash -c 'hostname "$0" && exec "$@"' "host$1")
}

roce_count_start() {
  local ns
  for ns in "$UROCE_NETNS_SERVER" "$UROCE_NETNS_CLIENT"; do
    ip netns exec "$ns" nft -f - <<'EOF' || return 1
table inet uroce_ucx_count {
  chain input {
    type filter hook input priority -10;
    udp dport 4791 counter
  }
}
EOF
  done
}

roce_received() {
  local ns
  ns=$([[ $1 == s ]] && echo "$UROCE_NETNS_SERVER" || echo "$UROCE_NETNS_CLIENT")
  ip netns exec "$ns" nft list table inet uroce_ucx_count 2>/dev/null |
    awk '/counter packets/ { for (i = 1; i < NF; ++i) { if ($i == "packets") p = $(i + 1); if ($i == "bytes") b = $(i + 1) } }
         END { print p + 0, b + 0 }'
}
