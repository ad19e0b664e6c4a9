#!/usr/bin/env bash
# uroce trace around an unmodified ibv_rc_pingpong pair over the UDP link:
# one timeline per QP with the QP's state changes, its work requests, the
# packets it sent and received and its completions, in order; then, with
# packets lost (UROCE_FAULTS), the congestion window's cuts.
# Usage: trace_test.sh UROCE_TOOL PORT   (exit 77: ibv_rc_pingpong missing)
set -u
tool=$1
port=$2
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibv_rc_pingpong not installed"; exit 77; }
out=$(mktemp "${TMPDIR:-/tmp}/uroce-trace-test.XXXXXX")
trap 'rm -f "$out"' EXIT
fail() {
  echo "FAIL: $*"
  sed -n 1,60p "$out"
  exit 1
}
export UROCE_LINK=udp
timeout 60 "$tool" trace -o "$out" -- \
  bash "$(dirname "$0")/../debian/run_pair.sh" "$port" ibv_rc_pingpong -d uroce_lo -g 1 -n 5 ||
  fail "uroce trace or the pair failed"
qps=$(grep -c '^QP [0-9]* (pid [0-9]*): [0-9]* events$' "$out")
((qps == 2)) || fail "$qps timelines, not 2"
# Each QP's timeline, in order: to RTS on the network link, a SEND posted,
# its packets out, the peer's ACK in, the send completion; and the peer's
# SENDs in, each completing a receive.
awk '/^QP /{n++} {print > ("'"$out"'." n)}' "$out"
for k in 1 2; do
  t=$out.$k
  for want in 'state INIT -> RTR (network link)' 'state RTR -> RTS (network link)' 'post_recv wr_id=' \
    'post_send wr_id=2 SEND len=4096 signaled' 'tx SEND_FIRST' 'tx SEND_LAST' 'rx ACKNOWLEDGE' \
    'send completion wr_id=2 SEND success len=4096' 'rx SEND_LAST' 'recv completion wr_id=1 RECV success len=4096'; do
    grep -qF "$want" "$t" || { rm -f "$out".?; fail "QP $k: no '$want'"; }
  done
  # The first SEND goes out after it was posted, and completes after the ACK came.
  p=$(grep -nF 'post_send wr_id=2' "$t" | head -1 | cut -d: -f1)
  x=$(grep -nF 'tx SEND_FIRST' "$t" | head -1 | cut -d: -f1)
  a=$(grep -nF 'rx ACKNOWLEDGE' "$t" | head -1 | cut -d: -f1)
  c=$(grep -nF 'send completion wr_id=2' "$t" | head -1 | cut -d: -f1)
  ((p < x && x < a && a < c)) || { rm -f "$out".?; fail "QP $k: events out of order ($p $x $a $c)"; }
done
rm -f "$out".?
lines=$(grep -c . "$out")
# Losses (5 % of the packets of 20-packet messages): each loss the requester
# acts on cuts its window, and the trace says so.
UROCE_FAULTS=drop=0.05,seed=7 timeout 60 "$tool" trace -o "$out" -- \
  bash "$(dirname "$0")/../debian/run_pair.sh" "$port" ibv_rc_pingpong -d uroce_lo -g 1 -n 40 -s 20000 ||
  fail "uroce trace or the pair failed (with losses)"
grep -qE 'window [0-9]+ srtt_us=[0-9.]+ target_us=[0-9.]+ \(cuts: delay [0-9]+ loss [1-9][0-9]* ' "$out" ||
  fail "no window cut for a loss in the trace"
echo "PASS: 2 timelines, $lines lines; window cuts: $(grep -c ' window [0-9]' "$out")"
