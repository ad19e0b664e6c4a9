#!/usr/bin/env bash
# `uroce capture` around an unmodified ibv_rc_pingpong pair over the network
# link on 127.0.0.1 (UROCE_LINK=udp): the merged file holds every packet
# twice (as sent and as received: both processes are on this host; but see
# pair_frames.py for the end of a flow), in time order, and passes
# ../shared/wire/roce_check.py and tshark (a step skipped, with one line
# saying so, without ../shared); with --sent-only it holds each packet once.
#
# Usage: capture_cli.sh UROCE_TOOL PORT
# Exit: 0 pass, 1 fail, 77 skipped (ibv_rc_pingpong or tshark missing).
set -u
tool=$1
port=$2
here=$(dirname "${BASH_SOURCE[0]}")
wire_dir=${UROCE_SHARED_WIRE:-$here/../../../../shared/wire}
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibv_rc_pingpong not installed"; exit 77; }
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
checkers=1
if [[ ! -f $wire_dir/roce_check.py ]]; then
  checkers=0
  echo "SKIP step: roce_check.py and tshark_roce.sh on the merged captures: no $wire_dir (../shared absent)"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-capture-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
export UROCE_LINK=udp
fail=0

check() {  # FILE: every frame passes both checkers; prints the frame count
  local r t
  if ((!checkers)); then
    tshark -r "$1" 2>/dev/null | wc -l
    return
  fi
  r=$(python3 "$wire_dir/roce_check.py" --quiet "$1" | tail -1)
  t=$(bash "$wire_dir/tshark_roce.sh" "$1" | tail -1)
  echo "$(basename "$1"): roce_check: $r; tshark: $t" >&2
  [[ $r =~ ^([1-9][0-9]*)\ passed,\ 0\ failed$ ]] || { fail=1; echo 0; return; }
  [[ $t == "$r" ]] || fail=1
  echo "${BASH_REMATCH[1]}"
}
sources() {  # FILE: "sent received" frame counts (the writer's made-up source MACs)
  tshark -r "$1" -T fields -e eth.src 2>/dev/null |
    awk '$1=="02:00:00:00:00:01"{s++} $1=="02:00:00:00:00:02"{r++} END{print s+0, r+0}'
}

"$tool" capture -o "$work/both.pcap" -- bash "$here/../debian/run_pair.sh" "$port" \
  ibv_rc_pingpong -d uroce_lo -g 1 -n 50 -s 5000 || { echo "FAIL: the pair under uroce capture"; fail=1; }
n=$(check "$work/both.pcap")
read -r sent recv < <(sources "$work/both.pcap")
echo "both: $n frames, $sent sent, $recv received"
((sent > 0 && recv > 0 && n == sent + recv)) || { echo "FAIL: expected packets as sent and as received"; fail=1; }
# Each received frame a copy of a sent one, and each sent one received,
# except at the very end of its flow: a tail probe or retransmission that
# reached a QP its process had already let go (uroced's linger answers it
# with the QP's last ACK again, and uroced captures nothing). Under load the
# receiver may read the original only after the probes were sent (seen: 2
# probes 0.4 ms after the last packet, read 5 ms later; 2 of 50 runs beside
# two busy loops): pair_frames.py judges by what was sent after a frame.
python3 "$here/pair_frames.py" "$work/both.pcap" || { echo "FAIL: sent and received frames do not pair"; fail=1; }
# In time order.
tshark -r "$work/both.pcap" -T fields -e frame.time_epoch 2>/dev/null | sort -c -g ||
  { echo "FAIL: frames out of time order"; fail=1; }

"$tool" capture --sent-only -o "$work/sent.pcap" -- bash "$here/../debian/run_pair.sh" "$((port + 1))" \
  ibv_rc_pingpong -d uroce_lo -g 1 -n 50 -s 5000 || { echo "FAIL: the pair under uroce capture --sent-only"; fail=1; }
n=$(check "$work/sent.pcap")
read -r sent recv < <(sources "$work/sent.pcap")
echo "sent-only: $n frames, $sent sent, $recv received"
((n > 0 && sent == n && recv == 0)) || { echo "FAIL: --sent-only kept received copies"; fail=1; }

# The command's exit status comes back.
"$tool" capture -o "$work/none.pcap" -- sh -c 'exit 3'
rc=$?
((rc == 3)) || { echo "FAIL: exit status $rc, not the command's 3"; fail=1; }

((fail == 0)) && echo PASS
exit "$fail"
