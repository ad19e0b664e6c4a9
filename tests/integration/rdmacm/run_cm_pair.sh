#!/usr/bin/env bash
# Runs an unmodified Debian program that connects with the RDMA CM (rping,
# ucmatose, rdma_server/rdma_client, ib_send_bw -R, ...) as a server and a
# client on this host, over uroce's librdmacm.so.1 and libibverbs.so.1
# (LD_LIBRARY_PATH is set by CTest).
#
# Usage: run_cm_pair.sh [--server-stays] [--wait-server REGEX] 'SERVER COMMAND' 'CLIENT COMMAND' [MATCH]
#   The commands are words split on blanks (no quoting inside).
#   MATCH: a regular expression both outputs together must contain.
#   --server-stays: the server never exits by itself (cmtime's): once the
#   client is done it is stopped, and only the client's status counts.
#   --wait-server REGEX: start the client once the server printed REGEX
#   (mckey's receiver must have joined before the sender sends).
#   --rerun-on-hup: rstream -T a's race (see below): a client that exits 16
#   after the server passed runs the pair once more, and that run counts.
#   --rerun-on-teardown-race: fi_pingpong's RDM race (see below): a side that
#   fails at its very end, after both printed MATCH, runs the pair once more
#   (twice at most), and the last run counts.
#
# rstream -T a waits in rpoll before every rrecv and fails with the poll's
# POLLHUP bit (exit 16) even when POLLIN is set beside it: once the server has
# written its last transfer it closes, and its in-band disconnect message
# follows the data on the QP; a client descheduled long enough to find both in
# its completion queue at one rpoll exits 16 with the data unread. rsocket's
# rs_poll_rs reports both bits by design, so this happens on any device when
# the client lags (here under ctest -j2 with the cores busy).
#
# fi_pingpong -e rdm (ofi_rxm over verbs) ends with one "fin" message each way
# and exits. ofi_rxm reads its CM events in its progress call, after a CQ read
# that found nothing; on DISCONNECTED it closes the connection's endpoint
# (ibv_destroy_qp) and only then drains the CQ. A side preempted between that
# empty CQ read and the event read (a system call: under ctest -j2 on two
# cores, for milliseconds) meanwhile gets the peer's fin and its disconnect,
# and destroys the QP with the fin's completion unread: on mlx5 and on uroce,
# which take a destroyed QP's completions out of its CQ, the fin is lost and
# the side waits for it forever; its own fin's send completion, if not read
# either, comes back as WR_FLUSH_ERR from the verbs provider ("cq_readerr:
# Work Request Flushed Error"). (Providers that keep the completions, such as
# rxe, let rxm repost the receive on the closed endpoint: a crash instead.)
# With the option a side still running RUN_PAIR_END_S (10) seconds after the
# other one exited counts as hung.
#
# The CM gives a client no way to wait for a listener, and a client finding
# none is REJECTED at once; so a client that fails, or says it was REJECTED
# (cmtime goes on and exits 0), within the first RUN_CM_RETRY_S (default 5)
# seconds of the server's start, with the server still running, is started
# again.
#
# Pass: both exit 0 (and MATCH is found).
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (a program is not installed).
# Bounded: everything must be done RUN_PAIR_TIMEOUT_S (default 60) seconds
# after the server started; what still runs then is reported and killed.
set -u
# shellcheck source=../proc_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../proc_lib.sh"

server_stays=0
wait_server=
rerun_on_hup=0
rerun_on_teardown=0
pass_on=()
while [[ ${1-} == --* ]]; do
  case $1 in
    --server-stays) server_stays=1; pass_on+=("$1"); shift ;;
    --wait-server) wait_server=$2; pass_on+=("$1" "$2"); shift 2 ;;
    --rerun-on-hup) rerun_on_hup=1; shift ;;
    --rerun-on-teardown-race) rerun_on_teardown=1; shift ;;
    *) echo "$0: unknown option $1" >&2; exit 2 ;;
  esac
done
if (($# < 2)); then
  echo "usage: $0 [--server-stays] [--wait-server REGEX] 'SERVER COMMAND' 'CLIENT COMMAND' [MATCH]" >&2
  exit 2
fi
read -r -a server_cmd <<<"$1"
read -r -a client_cmd <<<"$2"
match=${3-}
# The races the options name, judged on a first run's output ($out).
hup_race() {
  grep -q '^----- server (exit 0) -----$' <<<"$out" && grep -q '^FAIL: client exited with 16$' <<<"$out" &&
    [[ $(grep -c '^FAIL:' <<<"$out") == 1 ]]
}
# One side failed (hung at its end, or the provider's flush of its fin),
# after both sides printed MATCH: the whole exchange was done and counted.
teardown_race() {
  local server_out client_out fails
  server_out=$(awk '/^----- server \(exit/ { f = 1; next } /^----- client \(exit/ { f = 0 } f' <<<"$out")
  client_out=$(awk '/^----- client \(exit/ { f = 1; next } /^-----$/ { f = 0 } f' <<<"$out")
  fails=$(grep '^FAIL:' <<<"$out")
  [[ -n $match ]] && [[ $(wc -l <<<"$fails") == 1 ]] &&
    grep -Eq -- "$match" <<<"$server_out" && grep -Eq -- "$match" <<<"$client_out" &&
    { [[ $fails == *"after the other side ended (killed)" ]] ||
      { [[ $fails == "FAIL: "*" exited with "* ]] && grep -q 'Work Request Flushed Error' <<<"$out"; }; }
}
if ((rerun_on_hup || rerun_on_teardown)); then
  ((rerun_on_teardown)) && export RUN_PAIR_END_S=${RUN_PAIR_END_S:-10}
  out=$(bash "${BASH_SOURCE[0]}" "${pass_on[@]}" "$@")
  rc=$?
  echo "$out"
  why=
  if ((rc == 1)); then
    ((rerun_on_hup)) && hup_race && why="the client saw the server's disconnect with data unread (rpoll POLLIN|POLLHUP)"
    ((rerun_on_teardown)) && teardown_race && why="a side failed at its end after the whole exchange (ofi_rxm's teardown race)"
  fi
  # The teardown race can come twice in a row on a loaded two-core machine:
  # up to two more runs for it, one for the rpoll race.
  tries=$((rerun_on_teardown ? 2 : 1))
  while [[ -n $why ]] && ((tries-- > 0)); do
    echo "+ $why: once more"
    out=$(bash "${BASH_SOURCE[0]}" "${pass_on[@]}" "$@")
    rc=$?
    echo "$out"
    why=
    ((rc == 1 && rerun_on_teardown)) && teardown_race &&
      why="a side failed at its end after the whole exchange (ofi_rxm's teardown race)"
  done
  exit "$rc"
fi
limit_s=${RUN_PAIR_TIMEOUT_S:-60}
retry_s=${RUN_CM_RETRY_S:-5}
for b in "${server_cmd[0]}" "${client_cmd[0]}"; do
  if ! command -v "$b" >/dev/null 2>&1; then
    echo "SKIP: $b not installed (Debian packages rdmacm-utils, perftest)"
    exit 77
  fi
done

scratch cm-pair
server_pid=
client_pid=
start=$SECONDS
deadline=$((start + limit_s))
echo "+ ${server_cmd[*]}  (server)"
"${in_server[@]}" "${linebuf[@]}" "${server_cmd[@]}" >"$work/server.out" 2>&1 &
server_pid=$!
pids+=("$server_pid")

if [[ -n $wait_server ]]; then
  until grep -Eq -- "$wait_server" "$work/server.out" 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null && ((SECONDS < deadline)) || break
    sleep 0.05
  done
fi

# RUN_PAIR_END_S: the first side to end leaves the other that many seconds.
end_cut=0
end_of_one() {
  if [[ -n ${RUN_PAIR_END_S-} ]] && ((!end_cut && SECONDS + RUN_PAIR_END_S < deadline)); then
    deadline=$((SECONDS + RUN_PAIR_END_S))
    end_cut=1
  fi
}

attempt=0
while :; do
  attempt=$((attempt + 1))
  echo "+ ${client_cmd[*]}  (client, attempt $attempt)"
  "${in_client[@]}" "${linebuf[@]}" "${client_cmd[@]}" >"$work/client.out" 2>&1 &
  client_pid=$!
  pids+=("$client_pid")
  while kill -0 "$client_pid" 2>/dev/null && ((SECONDS < deadline)); do
    kill -0 "$server_pid" 2>/dev/null || end_of_one
    sleep 0.05
  done
  kill -0 "$client_pid" 2>/dev/null && break  # still running at the deadline: reap_pair says so
  wait "$client_pid"
  rc=$?
  if { ((rc == 0)) && ! grep -q REJECTED "$work/client.out"; } ||
    ((SECONDS - start >= retry_s)) || ! kill -0 "$server_pid" 2>/dev/null; then
    break
  fi
  cp "$work/client.out" "$work/client.attempt$attempt.out"
  sleep 0.2
done

if ((server_stays)) && ! kill -0 "$client_pid" 2>/dev/null; then
  kill -TERM "$server_pid" 2>/dev/null
fi
if [[ -n ${RUN_PAIR_END_S-} ]]; then
  while kill -0 "$server_pid" 2>/dev/null && kill -0 "$client_pid" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.05
  done
  end_of_one
fi
reap_pair "$deadline"
# shellcheck disable=SC2034 # report_pair reads it
((server_stays)) && server_rc=0
((client_rc == 127)) && client_rc=$rc  # reaped above already

when=
((end_cut)) && when="${RUN_PAIR_END_S}s after the other side ended"
report_pair ${when:+"$when"}
ok=$pair_ok
if [[ -n $match ]] && ! cat "$work/server.out" "$work/client.out" | grep -Eq -- "$match"; then
  echo "FAIL: neither output matches /$match/"
  ok=0
fi
if ((ok)); then
  echo "PASS: ${server_cmd[*]} / ${client_cmd[*]}"
  exit 0
fi
exit 1
