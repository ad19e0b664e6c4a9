#!/usr/bin/env bash
# Runs Debian's fio with its rdma engine (ioengine=rdma: librdmacm and
# libibverbs, here uroce's through LD_LIBRARY_PATH, set by CTest) on uroce_lo,
# as its HOWTO describes: a server (rw=read, listening on PORT) and a client
# (rw=write, hostname 127.0.0.1) in one of the engine's modes.
#
# Usage: run_fio.sh PORT MODE [--server-iodepth N]
#   MODE: write | read | send (fio's verb=)
#   --server-iodepth N: the server's iodepth (fio's default is 1)
#
# write, read: the client moves 16 MiB with RDMA WRITEs or READs into or
#   out of the server's buffers and tells it it is done. Pass: both exit 0
#   within the limit and report err=0, the client 16.0MiB written.
# send: the client SENDs 16 MiB into receives the server posts one at a
#   time. fio connects with rnr_retry_count 0, and its server re-posts a
#   receive only after it has handled the last one, so a SEND may find none:
#   the RNR NAK fails it (IBV_WC_RNR_RETRY_EXC_ERR, IBA vol. 1 9.7.5.2.8)
#   and fio prints "cq completion status 13(RNR retry counter exceeded)".
#   After that error fio's engine (engines/rdma.c, fio 3.33) waits in
#   ibv_get_cq_event for an event whose poll brings a successful completion,
#   which a QP in ERR never gives: the client (and the server waiting for
#   the rest) stays there until killed, as on the kernel's rxe (Debian 12's
#   6.1 rdma_rxe, measured in qemu: the same message, then both blocked in
#   ib_uverbs_event_read, SIGTERM ignored). Pass: the client either completes
#   (exit 0, both sides err=0: the receiver kept up) or reports that RNR
#   error well within the limit -- the error completion reached fio through
#   its armed completion channel. Any other outcome fails.
# send --server-iodepth 256: the server posts a receive for each of the 256
#   blocks before the client starts (fio's client sleeps 0.5 s after
#   connecting for that), so no SEND can find none. Pass: it completes.
#
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (fio not installed).
# Bounded: FIO_TIMEOUT_S (default 40) seconds for the pair. Every fio
# process is killed at the end: fio runs each job in a child of its own
# session, so the children are found (pgrep -P) and killed by id with their
# parents. (A main process whose rdma job was killed ends with status 139:
# fio 3.33 crashes in its own options_free then, with any libibverbs.)
set -u
# shellcheck source=../proc_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../proc_lib.sh"

server_args=()
if (($# == 4)) && [[ $3 == --server-iodepth ]]; then
  server_args=(--iodepth="$4")
elif (($# != 2)); then
  set --
fi
if (($# < 2)) || [[ $2 != write && $2 != read && $2 != send ]]; then
  echo "usage: $0 PORT write|read|send [--server-iodepth N]" >&2
  exit 2
fi
port=$1
mode=$2
limit_s=${FIO_TIMEOUT_S:-40}
rnr_msg='cq completion status 13(RNR retry counter exceeded)'

if ! command -v fio >/dev/null 2>&1; then
  echo "SKIP: fio not installed (Debian package fio; scripts/setup.sh)"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-fio.XXXXXX")
server_pid=
client_pid=
# fio's job processes of a main process, then (once it has reaped them, up
# to 2 s) the main process itself.
kill_fio() {
  local main=$1 kid kids i
  [[ -n $main ]] || return 0
  kids=$(pgrep -P "$main" 2>/dev/null)
  for kid in $kids; do kill -KILL "$kid" 2>/dev/null; done
  for kid in $kids; do
    for ((i = 0; i < 40; i++)); do
      [[ -e /proc/$kid ]] || break
      sleep 0.05
    done
  done
  kill -KILL "$main" 2>/dev/null
  wait "$main" 2>/dev/null
}
# shellcheck disable=SC2317 # called through the trap
cleanup() {
  kill_fio "$client_pid"
  kill_fio "$server_pid"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

common=(--ioengine=rdma --port="$port" --verb="$mode" --bs=64k --size=16m)
deadline=$((SECONDS + limit_s))
cd "$work" || exit 1
: >"$work/server.out"
: >"$work/client.out"
echo "+ fio --name=server ${common[*]} --rw=read ${server_args[*]}"
"${linebuf[@]}" fio --name=server "${common[@]}" --rw=read "${server_args[@]}" >"$work/server.out" 2>&1 &
server_pid=$!
# The client does not retry a rejected connect: start it once the server
# listens (it prints this right after rdma_listen).
until grep -q 'waiting for connection' "$work/server.out"; do
  if ! kill -0 "$server_pid" 2>/dev/null || ((SECONDS >= deadline)); then
    echo "FAIL: the server never listened"
    cat "$work/server.out"
    exit 1
  fi
  sleep 0.05
done
echo "+ fio --name=client ${common[*]} --rw=write --hostname=127.0.0.1"
"${linebuf[@]}" fio --name=client "${common[@]}" --rw=write --hostname=127.0.0.1 >"$work/client.out" 2>&1 &
client_pid=$!
start=$SECONDS

# Until both exit, or (send) the client reported the RNR error and had 2 s
# more to end by itself, or the limit.
rnr_at=
while kill -0 "$server_pid" 2>/dev/null || kill -0 "$client_pid" 2>/dev/null; do
  ((SECONDS >= deadline)) && break
  if [[ $mode == send && -z $rnr_at ]] && grep -qF "$rnr_msg" "$work/client.out"; then
    rnr_at=$((SECONDS - start))
  fi
  [[ -n $rnr_at ]] && ((SECONDS - start >= rnr_at + 2)) && break
  sleep 0.05
done
still=()
for side in server client; do
  pid_var=${side}_pid
  kill -0 "${!pid_var}" 2>/dev/null && still+=("$side")
done
# What a side still running is doing: its job's threads (and stacks) when
# that is a failure, one line when it is fio's wait after the RNR error.
for side in "${still[@]}"; do
  pid_var=${side}_pid
  for kid in $(pgrep -P "${!pid_var}"); do
    if [[ -n $rnr_at ]]; then
      echo "$side: fio's job (pid $kid) waits in $(cat "/proc/$kid/wchan" 2>/dev/null)"
    else
      dump_threads "$kid" "$side (fio's job)"
    fi
  done
done
exec 3>&2 2>/dev/null # bash's "Killed" notices: the verdict below says it
kill_fio "$server_pid"
wait "$server_pid"
server_rc=$?
kill_fio "$client_pid"
wait "$client_pid"
client_rc=$?
exec 2>&3 3>&-
server_pid=
client_pid=

running() { [[ " ${still[*]} " == *" $1 "* ]]; }
for side in server client; do
  rc_var=${side}_rc
  echo "----- $side (exit ${!rc_var}$(running "$side" && echo ', killed by this test')) -----"
  cat "$work/$side.out"
done
echo "-----"
# Both sides exited 0 and say err=0; the client wrote all 16 MiB.
completed() {
  ! running server && ! running client && ((server_rc == 0 && client_rc == 0)) &&
    grep -q 'err= 0' "$work/server.out" && grep -q 'err= 0' "$work/client.out" &&
    grep -q 'WRITE: .*io=16.0MiB' "$work/client.out"
}

if completed; then
  echo "PASS: fio rdma verb=$mode: 16 MiB, both sides exited 0"
  exit 0
fi
if [[ $mode == send && -n $rnr_at && ${#server_args[@]} -eq 0 ]]; then
  if running client; then
    echo "PASS: fio rdma verb=send: the client reported the RNR error after ${rnr_at}s" \
      "(fio then waits in ibv_get_cq_event, as on kernel rxe: killed)"
  else
    echo "PASS: fio rdma verb=send: the client reported the RNR error after ${rnr_at}s and exited $client_rc"
  fi
  exit 0
fi
for side in "${still[@]}"; do echo "FAIL: $side still running after ${limit_s}s (killed)"; done
for side in server client; do
  rc_var=${side}_rc
  running "$side" || ((${!rc_var} == 0)) || echo "FAIL: $side exited with ${!rc_var}"
done
echo "FAIL: fio rdma verb=$mode did not complete"
exit 1
