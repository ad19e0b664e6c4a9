#!/usr/bin/env bash
# rdma-core's ibv_xsrq_pingpong (XRC: shared XRC domain, XRC SRQs, XRC
# initiator and target QPs) over uroce: one server expecting N clients, and N
# client processes. Pass: every process exits 0 and prints "success".
# Across two namespaces (../netns/with_netns.sh) the server runs on one host
# and the clients on the other (../proc_lib.sh: in_server, in_client).
# Usage: xsrq_pingpong.sh PORT NCLIENTS DEVICE GID_INDEX
# Exit: 0 pass, 1 fail, 77 skipped (binary not installed). Bounded by a 30 s timeout.
set -u
# shellcheck source=../proc_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../proc_lib.sh"
port=$1 n=$2 dev=$3 gid=$4
command -v ibv_xsrq_pingpong >/dev/null 2>&1 || { echo "SKIP: ibv_xsrq_pingpong not installed"; exit 77; }
scratch xsrq

"${in_server[@]}" timeout 30 ibv_xsrq_pingpong -d "$dev" -g "$gid" -p "$port" -c "$n" >"$work/server.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do listening "$port" "${pids[0]}" && break; sleep 0.05; done
for i in $(seq 1 "$n"); do
  "${in_client[@]}" timeout 30 ibv_xsrq_pingpong -d "$dev" -g "$gid" -p "$port" "$server_addr" >"$work/client$i.out" 2>&1 &
  pids+=($!)
done
fail=0
for idx in "${!pids[@]}"; do
  wait "${pids[$idx]}" || fail=1
done
for f in "$work"/*.out; do
  echo "--- $(basename "$f")"
  cat "$f"
  grep -q '^success' "$f" || fail=1
done
((fail == 0)) && echo "PASS: server + $n clients" || echo "FAIL"
exit $fail
