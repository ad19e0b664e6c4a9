#!/usr/bin/env bash
# A plain TCP program's bytes through rsockets: unmodified socat (server) and
# nc (client) under Debian's librspreload.so, which turns their socket calls
# into uroce's r* calls. One side of run_cm_pair.sh each.
#
# Usage: rsocket_copy.sh serve ADDR PORT   socat receives into a file, checks it
#        rsocket_copy.sh send ADDR PORT    nc sends the data, then shuts down
#
# The data is `seq 1 300000` (2 MB): the server compares the SHA-256 of what it
# received with that of the data and prints "rsocket copy: intact".
# librspreload falls back to kernel sockets when rsocket() fails: the server
# fails if a kernel TCP socket listens on PORT (nc's listening side cannot be
# used: it accepts with accept4, which Debian 12's librspreload does not
# intercept).
# Exit: 0 pass, 1 fail, 77 skipped (a program or librspreload missing).
set -u
preload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
[[ -e $preload ]] || { echo "SKIP: $preload missing (Debian package librdmacm1)"; exit 77; }
for b in socat nc seq sha256sum ss; do
  command -v "$b" >/dev/null 2>&1 || { echo "SKIP: $b not installed"; exit 77; }
done
(($# == 3)) || { echo "usage: $0 serve|send ADDR PORT" >&2; exit 2; }
mode=$1 addr=$2 port=$3
data() { seq 1 300000; }
with_rsockets=(env "LD_PRELOAD=$preload${LD_PRELOAD:+ $LD_PRELOAD}")

case $mode in
  serve)
    out=$(mktemp)
    trap 'rm -f "$out"' EXIT
    "${with_rsockets[@]}" socat -u "TCP-LISTEN:$port,bind=$addr,reuseaddr" "OPEN:$out,creat,trunc" &
    pid=$!
    sleep 0.3
    if ss -Htln "sport = :$port" | grep -q .; then
      echo "FAIL: a kernel TCP socket listens on port $port (librspreload fell back)"
      kill "$pid" 2>/dev/null
      exit 1
    fi
    wait "$pid"
    rc=$?
    want=$(data | sha256sum)
    got=$(sha256sum <"$out")
    echo "socat exited $rc, received $(stat -c %s "$out") bytes"
    if ((rc != 0)) || [[ $got != "$want" ]]; then
      echo "FAIL: the data received differs from the data sent"
      exit 1
    fi
    echo "rsocket copy: intact"
    ;;
  send)
    data | "${with_rsockets[@]}" nc -N "$addr" "$port"
    ;;
  *)
    echo "usage: $0 serve|send ADDR PORT" >&2
    exit 2
    ;;
esac
