#!/usr/bin/env bash
# Runs one tool of perftest 4.5 (Debian package perftest: ib_send_lat,
# ib_write_bw, ...) unmodified on uroce's libibverbs.so.1 (LD_LIBRARY_PATH is
# set by CTest, see tests/CMakeLists.txt), server and client on this host, and
# checks the result tables they print. Mirrors ../debian/run_pair.sh.
#
# Usage: run_perftest.sh [MODE] PORT TOOL [ARGS...]
#   server: TOOL -p PORT ARGS...
#   client: TOOL -p PORT ARGS... localhost   (perftest: server name comes last)
# MODE:
#   --pair (default)  both run to the end by themselves.
#   --infinite        both run with --run_infinitely (pass -D N in ARGS: one
#                     result line every N s); once the client has printed two
#                     result lines (ib_send_bw: the server too), the client and
#                     then the server get SIGINT, as a user's Ctrl-C.
#   --loopback        Debian's run_perftest_loopback script runs the pair:
#                     `run_perftest_loopback 0 1 TOOL -p PORT ARGS...` (server
#                     pinned to CPU 0, client to CPU 1, client started after a
#                     fixed 1 s sleep; the script's status is the client's).
# PORT is the TCP port of perftest's own address exchange; tests run in
# parallel, so every test passes a port of its own.
#
# Pass (--pair): both exit 0; the client prints a result table and so does
# the server (except ib_read_lat/ib_atomic_lat, whose servers are passive and
# print none); every row is sane (see check_rows); no "nan"/"inf"; no error
# message; and options given in ARGS show up in the output (-c, -q, -l, -e,
# -b, -A, -s, -a, --report_gbits, see check_options).
# Pass (--infinite): the client printed >= 2 sane rows and died of our SIGINT
# (perftest installs no SIGINT handler: status 130); the server died of our
# SIGINT too, or, for the half-duplex one-sided tools (write/read/atomic),
# whose server only waits on TCP for the client's final report, it exited 1
# with "Failed to exchange data between server and clients" once the killed
# client's socket closed.
# Pass (--loopback): run_perftest_loopback exits 0; its (shared) output holds
# sane rows, at least one per side that prints a table.
#
# Exit: 0 pass, 1 fail, 2 usage, 77 skipped (TOOL not installed).
# Bounded: everything must be done PERFTEST_TIMEOUT_S (default 60) seconds
# after the server started. A program still running then is reported with
# its threads' states (and stacks, when gdb is installed) and killed; whatever
# is still running when this script exits is killed too.
set -u
# shellcheck source=../proc_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../proc_lib.sh"

mode=pair
case ${1-} in
  --pair | --infinite | --loopback)
    mode=${1#--}
    shift
    ;;
esac
if (($# < 2)); then
  echo "usage: $0 [--pair|--infinite|--loopback] PORT TOOL [ARGS...]" >&2
  exit 2
fi
port=$1
tool=$2
shift 2
args=("$@")
limit_s=${PERFTEST_TIMEOUT_S:-60}

if ! command -v "$tool" >/dev/null 2>&1; then
  echo "SKIP: $tool not installed (Debian package perftest)"
  exit 77
fi
if [[ $mode == loopback ]]; then
  if ! command -v run_perftest_loopback >/dev/null 2>&1; then
    echo "SKIP: run_perftest_loopback not installed (Debian package perftest)"
    exit 77
  fi
  # The script pins the two sides to CPUs 0 and 1 with taskset.
  if ! taskset -c 1 true 2>/dev/null; then
    echo "SKIP: run_perftest_loopback needs CPUs 0 and 1"
    exit 77
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-perftest.XXXXXX")
server_pid=
client_pid=
loop_pid=
# shellcheck disable=SC2317 # called through the trap
cleanup() {
  local pid
  for pid in $server_pid $client_pid; do
    kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  # run_perftest_loopback runs in a session of its own: kill its whole group
  # (the script and both sides it started).
  if [[ -n $loop_pid ]]; then
    kill -KILL -- -"$loop_pid" 2>/dev/null
    wait "$loop_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# bash starts background commands with SIGINT ignored (no job control in a
# script); --infinite stops the programs with SIGINT, so give them back the
# default action (env --default-signal: coreutils >= 8.31).
sigdfl=()
env --default-signal=INT true 2>/dev/null && sigdfl=(env --default-signal=INT)



alive() { kill -0 "$1" 2>/dev/null; }

# Sleeps in small steps until PID is gone or the deadline passed (bash reaps
# its children as they exit, so kill -0 fails as soon as a program is done).
wait_gone() {
  while alive "$1" && ((SECONDS < deadline)); do sleep 0.05; done
}

# Result rows in FILE (lines whose fields are all numbers, in one of the
# layouts below), each checked; prints "ROWS N", then one line per bad row,
# then "SIZES s1 s2 ..." (the #bytes column, in order).
#   bandwidth (5 fields): #bytes #iterations BW_peak BW_average MsgRate
#     peak may be 0.00: perftest does not measure it on a send_bw server, in
#     duration mode or with --run_infinitely (its noPeak setting)
#   latency (9): #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
#   latency in duration mode (4): #bytes #iterations t_avg tps
# A line with a nan/inf field is a bad row whatever its layout.
# PERFTEST_LOSSY=1 (set by ../netns/with_netns.sh when packets are lost):
# perftest's own arithmetic then prints "-nan" as the standard deviation of
# latencies that mix microseconds with retransmission timeouts, and rounds
# the bandwidth of a few slow small messages to 0.00 MB/s; those two pass
# (the message rate must still be non-zero).
check_rows() {
  awk -v lossy="${PERFTEST_LOSSY:-0}" '
    function isnum(s) { return s ~ /^[0-9]+(\.[0-9]+)?$/ }
    function bad(why) { printf "BAD %s: %s\n", why, $0 }
    {
      special = 0; allnum = 1
      for (i = 1; i <= NF; i++) {
        f = tolower($i)
        if (f ~ /^[-+]?(nan|inf|infinity)$/) {
          if (lossy && NF == 9 && i == 7) $i = 1
          else special = 1
        }
        else if (!isnum($i)) allnum = 0
      }
      if (special) { bad("nan/inf"); next }
      if (!allnum || (NF != 4 && NF != 5 && NF != 9) || $1 !~ /^[0-9]+$/) next
      rows++; sizes = sizes " " $1
      if ($1 + 0 <= 0 || $2 + 0 <= 0) { bad("zero size or iterations"); next }
      if (NF == 5 && lossy && !($5 > 0)) bad("zero message rate")
      if (NF == 5 && !lossy && !($4 > 0 && $5 > 0)) bad("zero bandwidth or message rate")
      if (NF == 4 && !($3 > 0 && $4 > 0)) bad("zero latency or rate")
      if (NF == 9 && !($3 > 0 && $5 > 0 && $6 > 0 && $8 > 0 && $9 > 0 && $4 >= $3))
        bad("zero latency or t_max < t_min")
    }
    END { printf "ROWS %d\nSIZES%s\n", rows, sizes }
  ' "$1"
}

fails=()
fail() { fails+=("$1"); }

# Checks FILE (output of SIDE): sane rows, at least MIN of them.
check_output() {
  local file=$1 side=$2 min=$3 report rows
  report=$(check_rows "$file")
  rows=$(awk '$1 == "ROWS" { print $2 }' <<<"$report")
  while IFS= read -r line; do
    fail "$side: $line"
  done < <(grep '^BAD ' <<<"$report")
  ((rows >= min)) || fail "$side: $rows result rows, expected at least $min"
}

# Checks that FILE (output of SIDE) has no error message.
check_no_errors() {
  local line
  while IFS= read -r line; do
    fail "$1: error message: $line"
  done < <(grep -E -i "error|couldn't|failed|unable|not supported|exiting" "$2")
}

# Options in ARGS that perftest echoes in its header or table: check they took
# effect (a wrong table or a silently ignored option fails the test).
check_options() {
  local file=$1 side=$2 i a n
  for ((i = 0; i < ${#args[@]}; i++)); do
    a=${args[i]}
    n=${args[i + 1]-}
    case $a in
      -c) grep -Eq "Connection type : $n\b" "$file" || fail "$side: no 'Connection type : $n'" ;;
      -q) grep -Eq "Number of qps +: $n\b" "$file" || fail "$side: no 'Number of qps : $n'" ;;
      -l) grep -Eq "Post List +: $n\b" "$file" || fail "$side: no 'Post List : $n'" ;;
      -A) grep -Eq "Atomic $n " "$file" || fail "$side: no 'Atomic $n' test title" ;;
      -e) grep -q 'Test with events' "$file" || fail "$side: no 'Test with events'" ;;
      -b) grep -q 'Bidirectional' "$file" || fail "$side: no 'Bidirectional' test title" ;;
      --report_gbits) grep -q 'Gb/sec' "$file" || fail "$side: no 'Gb/sec' column" ;;
    esac
  done
}

# Row sizes: -s N: every row has N bytes (UD: perftest clamps to the MTU and
# says so); -a: the client has one row per size 2^1 .. 2^23.
check_sizes() {
  local file=$1 side=$2 i sizes want
  sizes=$(check_rows "$file" | awk '$1 == "SIZES" { $1 = ""; print substr($0, 2) }')
  for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
      -s)
        want=${args[i + 1]}
        if grep -q 'Changing to this MTU' "$file"; then continue; fi
        for s in $sizes; do
          [[ $s == "$want" ]] || { fail "$side: row of $s bytes, expected -s $want"; break; }
        done
        ;;
      -a)
        [[ $side == client ]] || continue
        want=$(for ((e = 1; e <= 23; e++)); do printf '%d ' $((1 << e)); done)
        [[ "$sizes " == "$want" ]] || fail "$side: -a sizes are '$sizes', expected '${want% }'"
        ;;
    esac
  done
}

show() {
  echo "----- $1 -----"
  cat "$2"
}

verdict() {
  echo "-----"
  if ((${#fails[@]} == 0)); then
    echo "PASS: $tool $* (mode $mode)"
    exit 0
  fi
  printf 'FAIL: %s\n' "${fails[@]}"
  exit 1
}

if listening "$port"; then
  echo "FAIL: TCP port $port is already in use; pick another port for this test"
  exit 1
fi
deadline=$((SECONDS + limit_s))

# ---------------------------------------------------------------- loopback
if [[ $mode == loopback ]]; then
  echo "+ run_perftest_loopback 0 1 $tool -p $port ${args[*]}"
  # setsid: its own process group, so a stuck run is killed as a whole.
  "${linebuf[@]}" setsid run_perftest_loopback 0 1 "$tool" -p "$port" "${args[@]}" \
    >"$work/loop.out" 2>&1 &
  loop_pid=$!
  wait_gone "$loop_pid"
  exec 3>&2 2>/dev/null
  timed_out=0
  if alive "$loop_pid"; then
    timed_out=1
    for pid in $(pgrep -g "$loop_pid"); do
      dump_threads "$pid" "$(cat /proc/"$pid"/comm 2>/dev/null)"
    done
    kill -KILL -- -"$loop_pid" 2>/dev/null
  fi
  wait "$loop_pid"
  rc=$?
  exec 2>&3 3>&-
  loop_pid=
  show "run_perftest_loopback (exit $rc)" "$work/loop.out"
  if ((timed_out)); then
    fail "still running after ${limit_s}s (killed)"
  else
    ((rc == 0)) || fail "run_perftest_loopback exited with $rc"
    # Both sides write to the same file, lines may interleave: count rows.
    min=2
    [[ $tool == ib_read_lat || $tool == ib_atomic_lat ]] && min=1
    check_output "$work/loop.out" "output" "$min"
    check_no_errors output "$work/loop.out"
  fi
  verdict "${args[@]}"
fi

# --------------------------------------------------------- pair / infinite
extra=()
[[ $mode == infinite ]] && extra=(--run_infinitely)

echo "+ $tool -p $port ${args[*]} ${extra[*]}  (server)"
"${in_server[@]}" "${sigdfl[@]}" "${linebuf[@]}" "$tool" -p "$port" "${args[@]}" "${extra[@]}" \
  >"$work/server.out" 2>&1 &
server_pid=$!

# The client does not retry its TCP connect, so start it only once the
# server listens (the server listens after it has set up its queue pairs).
until listening "$port" "$server_pid"; do
  if ! alive "$server_pid" || ((SECONDS >= deadline)); then
    break
  fi
  sleep 0.05
done

echo "+ $tool -p $port ${args[*]} ${extra[*]} $server_addr  (client)"
"${in_client[@]}" "${sigdfl[@]}" "${linebuf[@]}" "$tool" -p "$port" "${args[@]}" "${extra[@]}" "$server_addr" \
  >"$work/client.out" 2>&1 &
client_pid=$!

rows_of() { check_rows "$1" | awk '$1 == "ROWS" { print $2 }'; }

signalled=()
if [[ $mode == infinite ]]; then
  # Only ib_send_bw's server prints results while running infinitely.
  server_rows=0
  [[ $tool == ib_send_bw ]] && server_rows=2
  while alive "$client_pid" && alive "$server_pid" && ((SECONDS < deadline)); do
    if (($(rows_of "$work/client.out") >= 2 && $(rows_of "$work/server.out") >= server_rows)); then
      break
    fi
    sleep 0.2
  done
  both_ran=0
  alive "$client_pid" && alive "$server_pid" && both_ran=1
  if alive "$client_pid"; then
    kill -INT "$client_pid"
    signalled+=(client)
  fi
  wait_gone "$client_pid"
  if alive "$server_pid"; then
    kill -INT "$server_pid"
    signalled+=(server)
  fi
fi

reap_pair "$deadline"

show "server (exit $server_rc)" "$work/server.out"
show "client (exit $client_rc)" "$work/client.out"

for side in "${timed_out[@]}"; do
  fail "$side still running after ${limit_s}s (killed)"
done
in_list() {
  local x=$1
  shift
  [[ " $* " == *" $x "* ]]
}

if [[ $mode == pair ]]; then
  for side in server client; do
    in_list "$side" "${timed_out[@]}" && continue
    rc_var=${side}_rc
    ((${!rc_var} == 0)) || fail "$side exited with ${!rc_var}"
    min=1
    [[ $side == server && ($tool == ib_read_lat || $tool == ib_atomic_lat) ]] && min=0
    check_output "$work/$side.out" "$side" "$min"
    check_no_errors "$side" "$work/$side.out"
    check_options "$work/$side.out" "$side"
    check_sizes "$work/$side.out" "$side"
  done
else
  ((both_ran)) || fail "client or server ended before both printed results"
  if ! in_list client "${timed_out[@]}"; then
    ((client_rc == 130)) || fail "client exited with $client_rc, expected 130 (killed by our SIGINT)"
    check_output "$work/client.out" client 2
    check_options "$work/client.out" client
  fi
  if ! in_list server "${timed_out[@]}"; then
    if ((server_rc == 130)) && in_list server "${signalled[@]}"; then
      :
    elif ((server_rc == 1)) && [[ $tool != ib_send_bw ]] &&
      grep -q 'Failed to exchange data between server and clients' "$work/server.out"; then
      echo "note: server exited 1 after the client was killed (waits on TCP for its report)"
    else
      fail "server exited with $server_rc"
    fi
    check_output "$work/server.out" server "$server_rows"
    grep -q '#bytes' "$work/server.out" || fail "server: printed no result table header"
  fi
fi
verdict "${args[@]}"
