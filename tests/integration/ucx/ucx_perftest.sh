#!/usr/bin/env bash
# Runs UCX's ucx_perftest (Debian ucx-utils, UCX 1.13, unmodified) as a
# server and a client over uroce, once per CASE, with UCX's default settings.
#
# Usage: ucx_perftest.sh PORT DEVICE CASE...
#   PORT    TCP port of ucx_perftest's own address exchange
#   DEVICE  the uroce device UCX may use: `uroce devnodes DEVICE` makes its
#           /dev/infiniband entry (run inside private_dev.sh); "default":
#           the devices `uroce devnodes` picks by itself
#   CASE    ucx_perftest arguments as one word, e.g. "-t am_lat -d uroce_lo:1
#           -x rc_verbs -n 1000"; it must name -n (iterations) and may name
#           -s (message size, default 8); a case may start with UCX_TLS=...,
#           which is then set for both sides (see tests.cmake for when a test
#           selects transports, and why)
#
# One host: both programs here. Two hosts (inside with_netns.sh): the server
# is host s, the client host c (ucx_lib.sh host_argv), and the RoCE v2
# datagrams the server received during a case (nftables) must number at
# least -n and carry at least -n x -s bytes: the case's messages went over
# uroce's network link, not over UCX's tcp transport.
#
# Pass: for every case both exit 0 and the client prints its "Final:" row.
# Exit: 0 pass, 1 fail, 77 skipped (ucx_perftest not installed). Each case
# is bounded by UCX_PERFTEST_TIMEOUT_S (default 60) seconds; a program still
# running then is reported (threads, stacks with gdb) and killed.
set -u
# shellcheck source=ucx_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ucx_lib.sh"

if (($# < 3)); then
  echo "usage: $0 PORT DEVICE CASE..." >&2
  exit 2
fi
port=$1
device=$2
shift 2
limit_s=${UCX_PERFTEST_TIMEOUT_S:-60}
ucx_require ucx_perftest

scratch ucx-perftest
server_pid=
client_pid=
trap 'for p in $server_pid $client_pid; do kill -KILL "$p" 2>/dev/null; done; scratch_cleanup' EXIT

srv=()
cli=()
if two_hosts; then
  host_argv s
  srv=("${host[@]}")
  host_argv c
  cli=("${host[@]}")
  # The entries of the network devices (host s lists the same ones as c).
  if [[ $device == default ]]; then
    "${srv[@]}" "$UROCE_CLI" devnodes || exit 1
  else
    "${srv[@]}" "$UROCE_CLI" devnodes "$device" || exit 1
  fi
  roce_count_start || exit 1
else
  if [[ $device == default ]]; then devnodes || exit 1; else devnodes "$device" || exit 1; fi
fi

fail=0
for case_args in "$@"; do
  read -r -a args <<<"$case_args"
  envs=()
  while ((${#args[@]})) && [[ ${args[0]} == UCX_*=* ]]; do
    envs+=("${args[0]}")
    args=("${args[@]:1}")
  done
  iters=0 size=8
  for ((i = 0; i + 1 < ${#args[@]}; ++i)); do
    [[ ${args[i]} == -n ]] && iters=${args[i + 1]}
    [[ ${args[i]} == -s ]] && size=${args[i + 1]}
  done
  before=(0 0)
  two_hosts && read -r -a before <<<"$(roce_received s)"

  if listening "$port"; then
    echo "FAIL: TCP port $port is already in use; pick another port for this test"
    exit 1
  fi
  deadline=$((SECONDS + limit_s))
  echo "+ ${envs[*]} ucx_perftest -p $port ${args[*]}"
  "${srv[@]}" env "${envs[@]}" "${linebuf[@]}" ucx_perftest -p "$port" "${args[@]}" >"$work/server.out" 2>&1 &
  server_pid=$!
  until listening "$port" "$server_pid"; do
    if ! kill -0 "$server_pid" 2>/dev/null || ((SECONDS >= deadline)); then break; fi
    sleep 0.05
  done
  addr=127.0.0.1
  two_hosts && addr=$UROCE_SERVER_ADDR
  "${cli[@]}" env "${envs[@]}" "${linebuf[@]}" ucx_perftest "$addr" -p "$port" "${args[@]}" >"$work/client.out" 2>&1 &
  client_pid=$!
  reap_pair "$deadline"

  verdict=PASS
  why=
  if ((${#timed_out[@]})); then
    verdict=FAIL why="still running after ${limit_s} s: ${timed_out[*]}"
  elif ((server_rc != 0 || client_rc != 0)); then
    verdict=FAIL why="exit status: server $server_rc, client $client_rc"
  elif ! grep -q '^Final:' "$work/client.out"; then
    verdict=FAIL why="no Final row"
  fi
  if [[ $verdict == PASS ]] && two_hosts; then
    read -r -a after <<<"$(roce_received s)"
    pk=$((after[0] - before[0])) by=$((after[1] - before[1]))
    echo "  RoCE v2 datagrams host s received: $pk ($by bytes)"
    if ((pk < iters || by < iters * size)); then
      verdict=FAIL why="fewer RoCE v2 datagrams or bytes than messages ($iters x $size B): not over uroce"
    fi
  fi
  if [[ $verdict == PASS ]]; then
    echo "  PASS: $(grep '^Final:' "$work/client.out")"
  else
    echo "  FAIL: $why"
    echo "----- server (exit $server_rc) -----"
    tail -40 "$work/server.out"
    echo "----- client (exit $client_rc) -----"
    tail -40 "$work/client.out"
    fail=1
  fi
done
exit "$fail"
