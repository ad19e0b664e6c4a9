#!/usr/bin/env bash
# The CM's errors between two hosts (run by ../netns/with_netns.sh, which
# sets UROCE_NETNS_SERVER, UROCE_NETNS_CLIENT and UROCE_SERVER_ADDR), each
# seen by an unmodified rping:
#   1. nothing listens on the port (a server listens on another): the
#      server host's uroced answers the REQ with a REJ, reason 8 (invalid
#      service ID), as a kernel's CM does;
#   2. no host has the address (10.77.0.99 on the veth's subnet): no answer
#      to the REQ, sent again UROCE_CM_RETRIES times, then UNREACHABLE with
#      -ETIMEDOUT (-110);
#   3. the server's process is killed while connected: its uroced ends the
#      connection for it (DREQ), and the client sees DISCONNECTED;
#   4. (not an error) a wildcard listener on the client's own host with the
#      same port does not take a connect to the other host.
# Exit: 0 when all four behave so, 1 otherwise.
set -u
# shellcheck source=../proc_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../proc_lib.sh"
command -v rping >/dev/null 2>&1 || { echo "SKIP: rping not installed (rdmacm-utils)"; exit 77; }
scratch cm-wire-errors
addr=${UROCE_SERVER_ADDR:?run by with_netns.sh}
rc=0
check() {  # check NAME FILE REGEX
  if grep -Eq "$3" "$2"; then
    echo "PASS: $1"
  else
    echo "FAIL: $1: no /$3/ in:"
    sed 's/^/  /' "$2"
    rc=1
  fi
}

# 1. No listener on the port: a server listens on another (the server
# host's uroced then has QP1 open: it opens it for its first CM client).
"${in_server[@]}" rping -s -a "$addr" -p 7000 -C 1 >"$work/1s.out" 2>&1 &
other=$!
sleep 1
"${in_client[@]}" timeout 30 rping -c -a "$addr" -C 1 >"$work/1.out" 2>&1
kill -KILL "$other" 2>/dev/null
wait "$other" 2>/dev/null
check "no listener: REJECTED with reason 8" "$work/1.out" 'RDMA_CM_EVENT_REJECTED, error 8'

# 2. No host: three tries 16 ms + 0.54 s apart.
"${in_client[@]}" env UROCE_CM_RESPONSE_TIMEOUT=12 UROCE_CM_RETRIES=2 UROCE_DAEMON_NAME="${UROCE_DAEMON_NAME:-x}-2" \
  timeout 30 rping -c -a 10.77.0.99 -C 1 >"$work/2.out" 2>&1
check "no host: UNREACHABLE -ETIMEDOUT" "$work/2.out" 'RDMA_CM_EVENT_UNREACHABLE, error -110'

# 3. The server's process dies while connected (rping -C 0: pings forever;
# no `timeout` around it: its SIGKILL must reach rping itself).
"${in_server[@]}" rping -s -a "$addr" -C 0 >"$work/3s.out" 2>&1 &
server=$!
client_rc=
# A client that ends without pinging was refused (the server was not
# listening yet): start another. One still connecting is waited for (a
# loaded machine can take seconds): a second client would find the
# one-connection rping server gone.
for _ in 1 2 3 4 5; do
  "${in_client[@]}" timeout 30 rping -c -a "$addr" -C 0 -v >"$work/3.out" 2>&1 &
  client=$!
  for ((t = 0; t < 200; t++)); do
    grep -q 'ping data' "$work/3.out" && break 2
    kill -0 "$client" 2>/dev/null || break
    sleep 0.1
  done
  wait "$client"
done
kill -KILL "$server" 2>/dev/null
wait "$server" 2>/dev/null
wait "$client"
client_rc=$?
check "peer killed: the client sees DISCONNECTED" "$work/3.out" 'DISCONNECT EVENT'
((client_rc != 124)) || { echo "FAIL: the client still ran after 30 s"; rc=1; }
# 4. Not an error: a listener of the client's own host on the wildcard
# address and the same port does not take a connect to another host.
"${in_client[@]}" rping -s -C 1 >"$work/4l.out" 2>&1 &
decoy=$!
"${in_server[@]}" timeout 30 rping -s -a "$addr" -C 3 >"$work/4s.out" 2>&1 &
server=$!
sleep 1
"${in_client[@]}" timeout 30 rping -c -a "$addr" -C 3 -v >"$work/4.out" 2>&1
wait "$server"
kill -KILL "$decoy" 2>/dev/null
wait "$decoy" 2>/dev/null
check "the other host's listener, not this host's wildcard one" "$work/4.out" 'ping data: rdma-ping-2'
[[ ! -s $work/4l.out ]] || { echo "FAIL: the wildcard listener of the client's host heard from it:"; cat "$work/4l.out"; rc=1; }
exit "$rc"
