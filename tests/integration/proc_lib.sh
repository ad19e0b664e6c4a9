#!/usr/bin/env bash
# Shared by the scripts that run unmodified Debian programs as server/client
# pairs (debian/, perftest/). Source it; it defines:
#   linebuf      argv prefix for line-buffered stdout (empty without stdbuf),
#                so a program that hangs or is killed still shows its output
#   listening P [PID]  true when something listens on TCP port P (IPv4 or
#                IPv6), in the network namespace of PID if given
#   in_server, in_client  argv prefixes that run a side in its network
#                namespace (and behind $UROCE_AS, if set), and server_addr,
#                the address the client names (localhost; see
#                tests/integration/netns/with_netns.sh)
#   dump_threads PID LABEL   what a stuck program is doing (bounded)
#   scratch NAME   a temporary directory $work and a list $pids of
#                processes, both cleaned up on exit
#   reap_pair DEADLINE  waits until $server_pid and $client_pid exit or
#                $SECONDS reaches DEADLINE, kills (after dump_threads) what
#                still runs, reaps both; sets server_rc, client_rc and
#                timed_out (the sides it killed), clears the pids
#   report_pair [WHEN]  after reap_pair: prints both outputs under their
#                exit statuses, then a FAIL line for each side killed
#                ("still running WHEN", default "after ${limit_s}s") or
#                exited non-zero; pair_ok is 1 if there was none

# stdbuf is coreutils; without it the output is block-buffered.
linebuf=()
command -v stdbuf >/dev/null 2>&1 && linebuf=(stdbuf -oL)

# Two "hosts" (tests/integration/netns/with_netns.sh): the server runs in
# namespace UROCE_NETNS_SERVER, the client in UROCE_NETNS_CLIENT, and the
# client connects to UROCE_SERVER_ADDR instead of localhost.
in_server=()
in_client=()
server_addr=localhost
[[ -n ${UROCE_NETNS_SERVER-} ]] && in_server=(ip netns exec "$UROCE_NETNS_SERVER")
[[ -n ${UROCE_NETNS_CLIENT-} ]] && in_client=(ip netns exec "$UROCE_NETNS_CLIENT")
[[ -n ${UROCE_SERVER_ADDR-} ]] && server_addr=$UROCE_SERVER_ADDR
# UROCE_AS: a command prefix each side runs behind, inside its namespace
# (netns/xdp_noprivs.sh: setpriv, to run as another user).
if [[ -n ${UROCE_AS-} ]]; then
  read -ra as_prefix <<<"$UROCE_AS"
  in_server+=("${as_prefix[@]}")
  in_client+=("${as_prefix[@]}")
fi

# From /proc/net: local address "ADDR:PORT" in hex, state 0A = LISTEN.
# /proc/PID/net shows the network namespace of PID.
listening() {
  local hex dir=/proc/net
  [[ -n ${2-} ]] && dir=/proc/$2/net
  hex=$(printf '%04X' "$1")
  awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" { found = 1 } END { exit !found }' \
    "$dir"/tcp "$dir"/tcp6 2>/dev/null
}

# State and kernel wait channel per thread, then user-space stacks if gdb is
# there (bounded by a timeout).
dump_threads() {
  local pid=$1 t
  echo "--- $2 (pid $pid) threads: name state wchan"
  for t in /proc/"$pid"/task/*; do
    printf '  %s %s %s\n' "$(cat "$t/comm" 2>/dev/null)" \
      "$(awk '{print $3}' "$t/stat" 2>/dev/null)" "$(cat "$t/wchan" 2>/dev/null)"
  done
  if command -v gdb >/dev/null 2>&1; then
    timeout 30 gdb -p "$pid" -batch -ex 'thread apply all bt 20' 2>/dev/null | grep -E '^(Thread|#)'
  fi
}

reap_pair() {
  local deadline=$1 side pid_var
  # bash reaps its children as they exit, so kill -0 fails as soon as a
  # program is done.
  while kill -0 "$server_pid" 2>/dev/null || kill -0 "$client_pid" 2>/dev/null; do
    ((SECONDS >= deadline)) && break
    sleep 0.05
  done
  # bash prints a "Killed" notice for each killed job on its stderr whenever
  # it reaps one; silence it until both are reaped (the caller's verdict says it).
  exec 3>&2 2>/dev/null
  timed_out=()
  for side in server client; do
    pid_var=${side}_pid
    if kill -0 "${!pid_var}" 2>/dev/null; then
      timed_out+=("$side")
      dump_threads "${!pid_var}" "$side"
      kill -KILL "${!pid_var}" 2>/dev/null
    fi
  done
  wait "$server_pid"
  server_rc=$?
  wait "$client_pid"
  client_rc=$?
  exec 2>&3 3>&-
  server_pid=
  client_pid=
}

report_pair() {
  local when=${1:-"after ${limit_s}s"} side rc_var
  echo "----- server (exit $server_rc) -----"
  cat "$work/server.out"
  echo "----- client (exit $client_rc) -----"
  cat "$work/client.out"
  echo "-----"
  pair_ok=1
  for side in "${timed_out[@]}"; do
    echo "FAIL: $side still running $when (killed)"
    pair_ok=0
  done
  for side in server client; do
    rc_var=${side}_rc
    [[ " ${timed_out[*]} " == *" $side "* ]] && continue
    if [[ ${!rc_var} -ne 0 ]]; then
      echo "FAIL: $side exited with ${!rc_var}"
      pair_ok=0
    fi
  done
}

# scratch NAME: sets work to a new temporary directory and pids to (); on
# exit, every process in pids is killed and reaped and work is removed.
scratch() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-$1.XXXXXX")
  pids=()
  trap scratch_cleanup EXIT
}
# shellcheck disable=SC2317 # called through the trap
scratch_cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
