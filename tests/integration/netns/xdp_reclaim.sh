#!/usr/bin/env bash
# A process killed while it holds the interface's AF_XDP socket gives it
# back (docs/afxdp-link.md): uroced sees its connection close, detaches the
# XDP program and forgets its QPs, and the next process gets the socket. Run
# by ../netns/with_netns.sh --link xdp (UROCE_LINK_XDP=require: a QP that
# cannot have AF_XDP fails), so the second pair passes only on AF_XDP.
#
# Usage: xdp_reclaim.sh PORT
# 1. an ibv_rc_pingpong pair with endless iterations; both killed (SIGKILL)
#    once they are under way;
#    `uroce res qp` must show the server's QP on the AF_XDP link ("xdp");
# 2. the XDP program must leave the server's interface (the kernel says so);
# 3. a fresh pair (../debian/run_pair.sh) must pass;
# 4. `uroce stat` (UROCE_CLI) on the server's side must show the device's QPs
#    moved frames through the AF_XDP port both ways (NetCounters::xdp), and
#    none through UDP sockets.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../proc_lib.sh
source "$here/../proc_lib.sh"
port=$1
command -v ibv_rc_pingpong >/dev/null 2>&1 || { echo "SKIP: ibv_rc_pingpong not installed"; exit 77; }
scratch reclaim

# Whether an XDP program is attached to the server's rnic0.
xdp_on() { ip -n "$UROCE_NETNS_SERVER" link show rnic0 | grep -q 'prog/xdp'; }

echo "+ a pair that runs until killed"
"${in_server[@]}" ibv_rc_pingpong -d uroce_rnic0 -g 1 -n 100000000 -p "$port" >"$work/s1.out" 2>&1 &
server_pid=$!
pids+=("$server_pid")
for _ in $(seq 200); do listening "$port" "$server_pid" && break; sleep 0.05; done
"${in_client[@]}" ibv_rc_pingpong -d uroce_rnic0 -g 1 -n 100000000 -p "$port" "$server_addr" >"$work/c1.out" 2>&1 &
client_pid=$!
pids+=("$client_pid")
# Under way: the server's interface carries the program (bounded: 10 s).
for _ in $(seq 200); do xdp_on && break; sleep 0.05; done
if ! xdp_on; then
  echo "FAIL: no XDP program on the server's interface while the pair runs"
  cat "$work/s1.out" "$work/c1.out"
  exit 1
fi
# `uroce res qp` names the link the server's QP really takes (DEV QPN PID
# TYPE STATE DEST_QPN LINK).
res=$("${in_server[@]}" "${UROCE_CLI:?the uroce tool}" res qp)
echo "$res"
if ! echo "$res" | awk '$1 == "uroce_rnic0" && $5 == "RTS" { print $7 }' | grep -qx xdp; then
  echo "FAIL: uroce res qp does not show the server's QP on the AF_XDP link"
  exit 1
fi
sleep 0.5
kill -KILL "$server_pid" "$client_pid"
wait "$server_pid" "$client_pid" 2>/dev/null
echo "+ both killed"
for _ in $(seq 100); do xdp_on || break; sleep 0.05; done
if xdp_on; then
  echo "FAIL: the XDP program is still on the server's interface 5 s after its process died"
  exit 1
fi
echo "+ the program left the interface; a new pair on AF_XDP:"
bash "$here/../debian/run_pair.sh" "$port" ibv_rc_pingpong -d uroce_rnic0 -g 1 -c -n 200 -s 5000 || exit 1
stat=$("${in_server[@]}" "${UROCE_CLI:?the uroce tool}" stat uroce_rnic0)
echo "$stat" | grep -E '^ *(udp|xdp)\.(sent|received) '
count() { echo "$stat" | awk -v k="$1" '$1 == k { print $2 }'; }
# Each side sent 200 messages of 5000 bytes (5 frames each at MTU 1024) and its ACKs.
if ! (($(count xdp.sent) >= 1000 && $(count xdp.received) >= 1000 && $(count udp.sent) == 0)); then
  echo "FAIL: uroce stat does not show the frames on the AF_XDP port"
  exit 1
fi
