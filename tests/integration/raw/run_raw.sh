#!/usr/bin/env bash
# perftest's raw Ethernet tools (Debian package perftest: raw_ethernet_bw,
# raw_ethernet_lat, raw_ethernet_fs_rate), unmodified, between the two
# namespaces of ../netns/with_netns.sh (--link xdp: the frames go through
# the AF_XDP socket uroced lends each side), and what the kernel's own stack
# sees of them. docs/raw-ethernet.md.
#
# Usage: run_raw.sh CASE
#   bw      raw_ethernet_bw -D 2, 1024 B frames matched by MAC, IPv4 and UDP
#           ports (-B/-E/-J/-j/-K/-k), then 4 flows (--flows 4) with --sniffer
#           on the server: both sides exit 0 and the server received frames
#   mcast   raw_ethernet_bw --raw_mcast to 239.1.1.1 (01:00:5e:01:01:01):
#           the server attaches the group and receives
#   lat     raw_ethernet_lat -n 2000, 64 B: both exit 0 with a latency table
#   burst   raw_ethernet_burst_lat (latency under load), 1 KiB in bursts of 16,
#           both ways perftest 4.5+0.17 accepts: the software rate limiter
#           (--rate_limit in MB/s; the HW limit it asks for first falls back
#           to it, as on any RoCE port) and packet pacing on the client
#           (--rate_limit_type=PP: uroce paces the raw QP's frames); both
#           exit 0 with a latency table. -Q 1: every send signaled (with
#           perftest's default moderation of 100 and a burst of 16, no send
#           of the client is ever signaled and it waits forever, on any
#           device)
#   fs_rate raw_ethernet_fs_rate on the server side: exits 0, prints flows/s
#   kernel  a raw frame reaches a plain UDP socket in the peer namespace
#           (perftest's client builds IPv4/UDP frames to the server's address
#           and port 5001); while raw_ethernet_bw's server holds a rule for
#           that port the socket gets none, and once that server is killed
#           (SIGKILL) its rule leaves uroced's XDP program at once and the
#           socket gets them
#
# Needs UROCE_NETNS_SERVER/CLIENT (with_netns.sh). Exit: 0 pass, 1 fail,
# 77 skip (perftest's raw tools not installed).
set -u
case_=${1:?usage: run_raw.sh bw|mcast|lat|burst|fs_rate|kernel}
for t in raw_ethernet_bw raw_ethernet_lat raw_ethernet_burst_lat raw_ethernet_fs_rate; do
  command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t not installed (perftest)"; exit 77; }
done
S=${UROCE_NETNS_SERVER:?run under with_netns.sh}
C=${UROCE_NETNS_CLIENT:?run under with_netns.sh}
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-raw.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
smac=$(ip netns exec "$S" cat /sys/class/net/rnic0/address)
cmac=$(ip netns exec "$C" cat /sys/class/net/rnic0/address)
ips=(-J 10.77.0.1 -j 10.77.0.2 -K 5001 -k 5002)
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do
    [[ -f $f ]] || continue
    echo "--- $(basename "$f")"
    tail -25 "$f"
  done
  exit 1
}
# A table row: the line after the header that starts with the size.
rows() { grep -E '^ *[0-9]+[[:space:]]+[0-9.]+[[:space:]]' "$1"; }

# run_pair NAME SERVER_ARGS -- CLIENT_ARGS: the server first (the raw tools
# have no handshake: its rules must be in place and its receives posted
# before the client sends, or the first frames find an empty queue or a full
# ring and are lost for good). It is ready a moment after its results
# header (#bytes ...) appears: its stdout goes unbuffered (stdbuf) to see it.
run_pair() {
  local name=$1 tool=$2
  shift 2
  local sargs=() cargs=()
  while (($#)) && [[ $1 != -- ]]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  ip netns exec "$S" timeout 40 stdbuf -o0 "$tool" -d uroce_rnic0 --server "${sargs[@]}" \
    >"$work/$name-server.log" 2>&1 &
  local sp=$!
  pids+=("$sp")
  local waited
  for waited in $(seq 100); do
    grep -q '#bytes' "$work/$name-server.log" 2>/dev/null && break
    kill -0 "$sp" 2>/dev/null || break
    sleep 0.2
  done
  sleep 0.5
  ip netns exec "$C" timeout 40 "$tool" -d uroce_rnic0 --client "${cargs[@]}" >"$work/$name-client.log" 2>&1
  local crc=$?
  wait "$sp"
  local src=$?
  # perftest 4.5+0.17's raw_ethernet_bw server with --raw_mcast makes no
  # flow, then calls ibv_destroy_flow on each entry of its flow array (from
  # malloc, never set) at teardown: verbs.h's inline wrapper reads the
  # context through that pointer and the program dies of SIGSEGV (139) after
  # its report, on any device. Its report is what counts then.
  if [[ $name == mcast ]] && ((src == 139)) && rows "$work/$name-server.log" >/dev/null; then
    echo "NOTE: mcast server died in perftest's own teardown (ibv_destroy_flow of a flow it never made)"
    src=0
  fi
  ((crc == 0 && src == 0)) || fail "$name: client exit $crc, server exit $src"
  rows "$work/$name-client.log" >/dev/null || fail "$name: no result row from the client"
}

case $case_ in
  bw)
    run_pair bw raw_ethernet_bw -B "$smac" -E "$cmac" "${ips[@]}" -s 1024 -D 2 -- \
      -B "$cmac" -E "$smac" "${ips[@]}" -s 1024 -D 2
    # The server's row: frames received (iterations) > 0.
    n=$(rows "$work/bw-server.log" | awk '{print $2}' | head -1)
    ((${n:-0} > 0)) || fail "bw: the server received nothing"
    echo "bw: server received $n frames"
    run_pair flows raw_ethernet_bw -B "$smac" -E "$cmac" "${ips[@]}" --flows 4 --sniffer -s 512 -D 2 -- \
      -B "$cmac" -E "$smac" "${ips[@]}" --flows 4 -s 512 -D 2
    n=$(rows "$work/flows-server.log" | awk '{print $2}' | head -1)
    ((${n:-0} > 0)) || fail "flows: the server received nothing"
    echo "flows: server received $n frames"
    ;;
  mcast)
    mips=(-J 239.1.1.1 -j 10.77.0.2 -K 5001 -k 5002)
    run_pair mcast raw_ethernet_bw -B "$smac" -E 01:00:5e:01:01:01 "${mips[@]}" --raw_mcast -s 256 -D 2 -- \
      -B "$cmac" -E 01:00:5e:01:01:01 "${mips[@]}" --raw_mcast -s 256 -D 2
    n=$(rows "$work/mcast-server.log" | awk '{print $2}' | head -1)
    ((${n:-0} > 0)) || fail "mcast: the server received nothing"
    echo "mcast: server received $n frames"
    ;;
  lat)
    run_pair lat raw_ethernet_lat -B "$smac" -E "$cmac" "${ips[@]}" -s 64 -n 2000 -- \
      -B "$cmac" -E "$smac" "${ips[@]}" -s 64 -n 2000
    rows "$work/lat-client.log"
    ;;
  burst)
    # The server answers each frame, but only while fewer than its TX depth
    # of its answers wait for their completions, 16 CQEs a poll: it must
    # not be paced itself (its HW limit falls back to software, which only
    # the client's loop uses), and the client's bursts must stay small
    # (a burst smaller than 16 overruns perftest's completion array).
    # Nothing holds the client back but its rate: a server without CPU for
    # longer than its 512 receives (and the 512 frames of its AF_XDP ring)
    # last drops frames, on any device (counted: `uroce stat --qp`,
    # raw.dropped), and the client then waits for answers that never come.
    # perftest's lowest rate is 2.5 MB/s (its HW rate table, which it asks
    # first): 1 KiB frames make that 2,560 frames/s, 200 ms without CPU,
    # which a loaded CI machine does not reach; 64 B frames (40,960/s,
    # 12.5 ms) did.
    common=(-s 1024 -n 2000 --burst_size=16 -Q 1 --rate_units=M)
    run_pair burst_sw raw_ethernet_burst_lat -B "$smac" -E "$cmac" "${ips[@]}" "${common[@]}" --rate_limit=2.5 -- \
      -B "$cmac" -E "$smac" "${ips[@]}" "${common[@]}" --rate_limit=2.5
    rows "$work/burst_sw-client.log"
    run_pair burst_pp raw_ethernet_burst_lat -B "$smac" -E "$cmac" "${ips[@]}" "${common[@]}" --rate_limit=10 -- \
      -B "$cmac" -E "$smac" "${ips[@]}" "${common[@]}" --rate_limit_type=PP --rate_limit=2
    grep -q "Packet Pacing isn't supported" "$work/burst_pp-client.log" && fail "burst_pp: no packet pacing"
    rows "$work/burst_pp-client.log"
    ;;
  fs_rate)
    ip netns exec "$S" timeout 40 raw_ethernet_fs_rate -d uroce_rnic0 --server -B "$smac" "${ips[@]}" \
      >"$work/fs.log" 2>&1 || fail "fs_rate: exit $?"
    rows "$work/fs.log" || fail "fs_rate: no result row"
    ;;
  kernel)
    # A UDP socket on the server's address and port 5001 counts what it gets.
    ip netns exec "$S" timeout 30 /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.77.0.1", 5001))
s.settimeout(0.2)
out = open(sys.argv[1], "w", buffering=1)
t0 = time.monotonic()
while time.monotonic() - t0 < 12:
    try:
        s.recv(4096)
        out.write("%.3f\n" % (time.monotonic() - t0))
    except socket.timeout:
        pass
' "$work/udp.times" &
    pids+=($!)
    sleep 0.5
    # (No `timeout` in front: the pid killed must be the tool's own. -D
    # bounds it, and it is killed anyway.)
    ip netns exec "$S" raw_ethernet_bw -d uroce_rnic0 --server -B "$smac" -E "$cmac" "${ips[@]}" -s 256 -D 8 \
      >"$work/kernel-server.log" 2>&1 &
    server=$!
    pids+=("$server")
    sleep 1.5
    ip netns exec "$C" timeout 40 raw_ethernet_bw -d uroce_rnic0 --client -B "$cmac" -E "$smac" "${ips[@]}" -s 256 -D 6 \
      >"$work/kernel-client.log" 2>&1 &
    client=$!
    pids+=("$client")
    sleep 2
    before=$(wc -l <"$work/udp.times")
    kill -KILL "$server"
    killed_at=$SECONDS
    wait "$client"
    crc=$?
    sleep 1
    after=$(($(wc -l <"$work/udp.times") - before))
    echo "kernel: UDP socket got $before datagrams while the raw server's rule held, $after after it was killed"
    ((crc == 0)) || fail "kernel: client exit $crc"
    ((before == 0)) || fail "kernel: the rule let $before frames through to the kernel"
    ((after > 0)) || fail "kernel: nothing reached the UDP socket after the server died (${killed_at}s)"
    ;;
  *)
    echo "usage: run_raw.sh bw|mcast|lat|fs_rate|kernel" >&2
    exit 2
    ;;
esac
echo "PASS: $case_"
