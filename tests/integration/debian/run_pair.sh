#!/usr/bin/env bash
# Runs one of rdma-core's example programs (ibv_*_pingpong) as a server and a
# client on this host, both unmodified Debian binaries loading uroce's
# libibverbs.so.1 (LD_LIBRARY_PATH is set by CTest, see tests/CMakeLists.txt).
#
# Usage: run_pair.sh PORT BINARY [ARGS...]
#   server: BINARY -p PORT ARGS...
#   client: BINARY -p PORT ARGS... localhost
# PORT is the TCP port of the programs' own address exchange; tests run in
# parallel, so every test passes a port of its own.
#
# Pass: both exit 0 and both print their "N iters in S seconds" summary.
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (BINARY not installed).
# Bounded: both must be done RUN_PAIR_TIMEOUT_S (default 30) seconds after the
# server started. A program still running then is reported with its threads'
# states (and stacks, when gdb is installed) and killed; whatever is still
# running when this script exits is killed too.
set -u
# shellcheck source=../proc_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../proc_lib.sh"

if (($# < 2)); then
  echo "usage: $0 PORT BINARY [ARGS...]" >&2
  exit 2
fi
port=$1
bin=$2
shift 2
limit_s=${RUN_PAIR_TIMEOUT_S:-30}

if ! command -v "$bin" >/dev/null 2>&1; then
  echo "SKIP: $bin not installed (Debian package ibverbs-utils)"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-pair.XXXXXX")
server_pid=
client_pid=
# shellcheck disable=SC2317 # called through the trap
cleanup() {
  local pid
  for pid in $server_pid $client_pid; do
    kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM




if listening "$port"; then
  echo "FAIL: TCP port $port is already in use; pick another port for this test"
  exit 1
fi

deadline=$((SECONDS + limit_s))
echo "+ $bin -p $port $*  (server)"
"${in_server[@]}" "${linebuf[@]}" "$bin" -p "$port" "$@" >"$work/server.out" 2>&1 &
server_pid=$!

# The client does not retry its TCP connect, so start it only once the
# server listens (the server listens after it has set up its queue pairs).
until listening "$port" "$server_pid"; do
  if ! kill -0 "$server_pid" 2>/dev/null || ((SECONDS >= deadline)); then
    break
  fi
  sleep 0.05
done

echo "+ $bin -p $port $* $server_addr  (client)"
"${in_client[@]}" "${linebuf[@]}" "$bin" -p "$port" "$@" "$server_addr" >"$work/client.out" 2>&1 &
client_pid=$!

reap_pair "$deadline"

report_pair
ok=$pair_ok
for side in server client; do
  rc_var=${side}_rc
  [[ " ${timed_out[*]} " == *" $side "* || ${!rc_var} -ne 0 ]] && continue
  if ! grep -q ' iters in ' "$work/$side.out"; then
    echo "FAIL: $side printed no 'iters in' summary"
    ok=0
  fi
done
if ((ok)); then
  echo "PASS: $bin $*"
  exit 0
fi
exit 1
