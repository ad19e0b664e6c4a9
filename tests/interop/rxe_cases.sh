#!/usr/bin/env bash
# uroce against the Linux kernel's Soft-RoCE (rdma_rxe of Debian 12's kernel
# 6.1) in a qemu guest: the cases beyond the 28 of
# ../shared/interop/rxe-qemu/test-uroce-rxe.sh, on the same set-up and
# through that harness's own scripts: netns.sh (namespace rxeq: br0 =
# 10.77.0.1/24 and the guests' taps) and up.sh (guest g1 = 10.77.0.2 on tap0,
# rxe0 on its eth0, GID index $GIDX). uroce runs on the host in rxeq (device
# uroce_br0, GID 1). The programs are the Debian ones on both sides, except
# the multicast peer.
#
#   loss_*      RC perftest (ib_send_lat, ib_write_bw, ib_read_bw) while
#               nftables in rxeq drops LOSS % (default 3) of the UDP 4791
#               packets the host sends (hook output) and of those it
#               receives (hook input): uroce retransmits to rxe and answers
#               rxe's retransmissions. loss_out_* and loss_in_* drop on one
#               hook only (run when named).
#   ecn_write_bw  ib_write_bw while nftables in rxeq sets ECN CE on every
#               ECN-capable UDP 4791 packet the host receives (hook input)
#               and sends (hook output); rxe sends ECT(0) when asked
#               (perftest --tclass 2). g2h: uroce answers the marks with
#               CNPs, which rxe (no opcode 0x81) must drop harmlessly: the
#               capture must hold CNPs and the run end well. h2g: rxe takes
#               uroce's marked packets (the ICRC masks the TOS). UDP link
#               only (AF_XDP frames pass no netfilter hook).
#   qp4_*       perftest bandwidth over 4 QPs (-q 4: write, read)
#   bidir_*     perftest bandwidth both ways at once (-b: send, write)
#   cm_*        connections through the RDMA CM, the IBTA CM's MADs on QP1
#               between uroced and rxe's kernel CM: rping, ucmatose (2
#               connections), udaddy (SIDR), ib_send_bw -R; the capture
#               must also hold the CM's answer as tshark names it
#               (ConnectReply, or ServiceIDResReqResp for SIDR)
#   mcast       UD multicast (ibv_attach_mcast, group 239.7.7.7):
#               rxe_mcast_peer (tests/interop/tests.cmake) in the guest on
#               rxe and on the host on uroce, 20 datagrams checked by the
#               receiver (see run_mcast)
# Not here: XRC. The guest's rxe has none (no XRC in device_cap_flags;
# ibv_xsrq_pingpong: "Couldn't Open the XRC Domain 95", EOPNOTSUPP).
#
# Each case runs both ways: g2h = the guest is the client (multicast: the
# sender) and uroce the server (receiver); h2g = uroce the client (sender).
# Pass: both sides exit 0 and every RoCE packet captured on br0 passes
# ../shared/wire/roce_check.py (without it that step is skipped, one line
# saying so). rxe's retry_cnt 7 means retry forever: every command on both
# sides runs under `timeout`.
#
# Usage: rxe_cases.sh LIBDIR RXE_MCAST_PEER [CASE[:g2h|:h2g]...]
#   LIBDIR: uroce's libibverbs.so.1 (uroced in LIBDIR/../bin). Default: all.
# Environment: UROCE_RXE_HARNESS (the harness's directory; default
#   ../shared/interop/rxe-qemu beside the repository), RXEQ_CACHE (the
#   harness's, default /var/tmp/rxe-qemu; captures and logs go to
#   $RXEQ_CACHE/uroce-cases/), UROCE_INTEROP_LOSS (percent, default 3).
# Output: one PASS/FAIL line per case with what the capture shows (per
# direction: packets, how many roce_check failed, the first reason, and the
# packets nftables dropped), "N passed, M failed" last. Exit: 0 when all
# passed, 1 otherwise, 2 usage. Root only (netns, nftables, the taps).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib=$(cd "${1:?usage: rxe_cases.sh LIBDIR RXE_MCAST_PEER [CASE...]}" && pwd) || exit 2
peer=$(realpath "${2:?usage: rxe_cases.sh LIBDIR RXE_MCAST_PEER [CASE...]}") || exit 2
shift 2
harness=${UROCE_RXE_HARNESS:-$here/../../../shared/interop/rxe-qemu}
checker=$harness/../../wire/roce_check.py
loss_pct=${UROCE_INTEROP_LOSS:-3}
ns=rxeq
group=239.7.7.7
export RXEQ_CACHE=${RXEQ_CACHE:-/var/tmp/rxe-qemu}
# The peer goes into the guest's image (the harness rebuilds the image when
# this list changes: rxe_interop.sh sets the same for the harness's own run).
export RXEQ_EXTRA="$peer rstream riostream"
out=$RXEQ_CACHE/uroce-cases
mkdir -p "$out"

# Any other loss_{out,in}_, qp4_ or bidir_ + a perftest tool's suffix
# (e.g. qp4_send_bw) runs too when named.
all="loss_send_lat loss_write_bw loss_read_bw ecn_write_bw qp4_write_bw qp4_read_bw bidir_send_bw bidir_write_bw mcast
  cm_rping cm_ucmatose cm_udaddy cm_send_bw cm_rstream cm_riostream"
# shellcheck disable=SC2086 # a list of words
(($#)) || set -- $all

# case_def CASE DEV GIDX: sets prog (the server's command), cprog (the
# client's, to which the server's address is appended) and hook (output,
# input, both, or empty: where nftables drops).
case_def() {
  local c=$1 d=$2 g=$3 tool own=10.77.0.1
  [[ $d == rxe0 ]] && own=10.77.0.2
  hook=
  case $c in
    cm_rping) prog="rping -s -a $own -C 10 -v" cprog="rping -c -C 10 -v -a"; return 0 ;;
    cm_ucmatose) prog="ucmatose -c 2 -C 10" cprog="ucmatose -c 2 -C 10 -s"; return 0 ;;
    cm_udaddy) prog="udaddy" cprog="udaddy -s"; return 0 ;;
    cm_send_bw) prog="ib_send_bw -R -d $d -s 4096 -n 200" cprog=$prog; return 0 ;;
    # rsockets: uroce's against rdma-core's over rxe (-T v: the data checked)
    cm_rstream) prog="rstream -b $own -T v -S 4096 -C 100" cprog="rstream -T v -S 4096 -C 100 -s"; return 0 ;;
    cm_riostream) prog="riostream -b $own -S 4096 -C 100" cprog="riostream -S 4096 -C 100 -s"; return 0 ;;
    ecn_*) hook="ecn" tool="${c#ecn_} --tclass=2 -u 18" ;;
    loss_out_*) hook=output tool=${c#loss_out_} ;;
    loss_in_*) hook=input tool=${c#loss_in_} ;;
    loss_*) hook="output input" tool=${c#loss_} ;;
    # Without loss, with a 1 s local ACK timeout (-u 18; perftest's 14 is
    # 67 ms): a host starved of CPU (CI runs compilers and tests beside the
    # guest) must not make rxe retransmit on its timer, because rxe 6.1's
    # timer retry can resend a PSN with another opcode than it first sent it
    # with (seen in bidir_write_bw: PSN n went first as WRITE First, after
    # the timer as a zero-length WRITE Only, the rest of the stream one PSN
    # later), which the IBA's responder must refuse as an invalid request
    # (C9-90), and rxe's peer then fails with REM_INV_REQ_ERR. Taking
    # retransmissions is the loss_* cases' job, where NAKs drive them.
    qp4_*) tool="${c#qp4_} -q 4 -u 18" ;;
    bidir_*) tool="${c#bidir_} -b -u 18" ;;
    *) return 1 ;;
  esac
  case $tool in
    *_lat*) prog="ib_$tool -d $d -x $g -s 64 -n 200" ;;
    *_bw*) prog="ib_$tool -d $d -x $g -s 65536 -n 50" ;;
    *) return 1 ;;
  esac
  cprog=$prog
}

pids=()
# shellcheck disable=SC2317 # called through the trap
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  set_loss ""
}
trap cleanup EXIT
trap 'exit 1' INT TERM

host() { ip netns exec "$ns" env LD_LIBRARY_PATH="$lib" UROCE_DAEMON_NAME=interop-cases "$@"; }
# guest LOG SECONDS COMMAND: boots g1 on tap0, runs COMMAND, returns its status.
guest() {
  "$harness/up.sh" --name g1 --net tap --netns "$ns" --tap tap0 --ip 10.77.0.2/24 --timeout "$2" --log "$1" -- \
    "$3; rc=\$?; echo \"guest rc=\$rc\"; exit \$rc" >/dev/null 2>&1
}
# wait_log FILE PATTERN SECONDS
wait_log() {
  local i
  for ((i = 0; i < $3 * 5; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

set_loss() {  # "HOOK..."|"ecn"|"": nftables in rxeq drops loss_pct % of UDP 4791 at each hook (ecn: marks CE)
  local h
  ip netns exec "$ns" nft delete table inet uroce_interop_loss 2>/dev/null
  [[ -n $1 ]] || return 0
  if [[ $1 == ecn ]]; then
    {
      echo "table inet uroce_interop_loss {"
      for h in input output; do
        echo "  chain mark_$h {"
        echo "    type filter hook $h priority 0;"
        echo "    udp dport 4791 ip ecn ect0 counter ip ecn set ce"
        echo "  }"
      done
      echo "}"
    } | ip netns exec "$ns" nft -f -
    return
  fi
  {
    echo "table inet uroce_interop_loss {"
    for h in $1; do
      echo "  chain drop_$h {"
      echo "    type filter hook $h priority 0;"
      echo "    udp dport 4791 numgen random mod 100 < $loss_pct counter drop"
      echo "  }"
    done
    echo "}"
  } | ip netns exec "$ns" nft -f -
}
dropped() {  # "N" or, with two hooks, "N+M" (in the order set_loss got them; ecn: marked on input+output)
  ip netns exec "$ns" nft list table inet uroce_interop_loss 2>/dev/null |
    sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | paste -sd+
}

# run_pair DIR: server and client ($hprog and $hcprog on uroce, $gprog and
# $gcprog on rxe).
# shellcheck disable=SC2086 # $hprog is a command line
run_pair() {
  local hp gp try
  if [[ $1 == g2h ]]; then
    host timeout 120 $hprog >"$hlog" 2>&1 &
    hp=$!
    pids+=("$hp")
    guest "$glog" 150 "sleep 1; timeout 90 $gcprog 10.77.0.1"
    grc=$?
    wait "$hp"
    hrc=$?
  else
    guest "$glog" 150 "timeout 100 $gprog" &
    gp=$!
    pids+=("$gp")
    # perftest's server says so just before it listens (the CM programs
    # say nothing: the guest's command has begun, and a moment more); a
    # client that still comes too early (a slow guest) is refused, and
    # tries again.
    if [[ $gprog == ib_* ]]; then
      wait_log "$glog" 'Waiting for client to connect' 90
    else
      wait_log "$glog" 'RXEQ CMD BEGIN' 90
      sleep 2
    fi
    for try in 1 2 3 4 5; do
      sleep 1
      host timeout 90 $hcprog 10.77.0.2 >"$hlog" 2>&1
      hrc=$?
      ((hrc == 0 || try == 5)) && break
      [[ $hprog == ib_* ]] && ! grep -q "Couldn't connect to" "$hlog" && break
    done
    wait "$gp"
    grc=$?
  fi
}

# run_mcast DIR: g2h = the guest sends to the group, the host receives; h2g
# the other way. The receiver attaches, posts its receives, and then waits
# at most 10 s for the 20 datagrams. In the guest it also joins the group at
# the IP level (mcast_peer's JOIN_ADDR): rxe's ibv_attach_mcast in Linux 6.1
# does not, and the kernel then drops the datagrams before rxe (0 of 20
# arrived without it, 20 of 20 with it).
run_mcast() {
  local gp n=20
  rm -f "$out/mcast.ready"
  if [[ $1 == g2h ]]; then
    guest "$glog" 120 "sleep 4; timeout 60 $peer send rxe0 $group $n" &
    gp=$!
    pids+=("$gp")
    wait_log "$glog" 'RXEQ CMD BEGIN' 60
    host timeout 60 "$peer" recv uroce_br0 "$group" "$n" "$out/mcast.ready" >"$hlog" 2>&1
    hrc=$?
    wait "$gp"
    grc=$?
  else
    guest "$glog" 120 "$peer recv rxe0 $group $n /tmp/ready 10.77.0.2 & p=\$!
      i=0; while [ ! -e /tmp/ready ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i+1)); done
      echo MCAST-READY; wait \$p" &
    gp=$!
    pids+=("$gp")
    if wait_log "$glog" 'MCAST-READY' 90; then
      host timeout 60 "$peer" send uroce_br0 "$group" "$n" >"$hlog" 2>&1
      hrc=$?
    else
      echo "the guest's receiver never got ready" >"$hlog"
      hrc=1
    fi
    wait "$gp"
    grc=$?
  fi
}

# What roce_check.py's output (a file) shows, per direction:
# "10.77.0.1>10.77.0.2: N packets, F failed (first: REASON)".
evidence() {
  awk '
    /^#[0-9]+ (PASS|FAIL) / { d = $3; if (!(d in n)) order[++k] = d; n[d]++; if ($2 == "FAIL") f[d]++; next }
    /^ +FAIL:/ && !(d in why) { sub(/^ +FAIL: */, ""); why[d] = $0 }
    END {
      for (i = 1; i <= k; i++) {
        d = order[i]
        printf "%s%s: %d packets, %d failed", (i > 1 ? "; " : ""), d, n[d], f[d]
        if (d in why) printf " (first: %s)", why[d]
      }
    }' "$1"
}

pass=0
fail=0
run_case() {  # run_case CASE DIR
  local c=$1 dir=$2 tag pcap tp hprog gprog hcprog gcprog hlog glog grc hrc n drops chk i ok=1
  tag=$c-$dir
  pcap=$out/$tag.pcap hlog=$out/$tag-host.log glog=$out/$tag-guest.log
  if [[ $c != mcast ]]; then
    case_def "$c" uroce_br0 1 || { echo "FAIL $c $dir: unknown case"; fail=$((fail + 1)); return; }
    hprog=$prog hcprog=$cprog
    # shellcheck disable=SC2016 # the guest's shell expands it
    case_def "$c" rxe0 '$GIDX'
    gprog=$prog gcprog=$cprog
  fi
  rm -f "$pcap" "$pcap.check" "$hlog" "$glog"
  ip netns exec "$ns" timeout 300 tcpdump -Z root -i br0 -U -s 0 -w "$pcap" 'udp port 4791' 2>/dev/null &
  tp=$!
  pids+=("$tp")
  for ((i = 0; i < 20; i++)); do [[ -s $pcap ]] && break; sleep 0.2; done # tcpdump runs
  if [[ $c == mcast ]]; then
    hook=
    run_mcast "$dir"
  else
    set_loss "$hook"
    run_pair "$dir"
    drops=$(dropped)
    set_loss ""
  fi
  sleep 0.5
  kill "$tp" 2>/dev/null
  wait "$tp" 2>/dev/null
  pids=() # all waited for: no stale process ids for the cleanup to kill
  n=$(tcpdump -nr "$pcap" 2>/dev/null | wc -l)
  if [[ ! -f $checker ]]; then
    chk="roce_check step skipped: no $checker (../shared absent)"
  else
    python3 "$checker" "$pcap" >"$pcap.check" 2>&1 || ok=0
    chk=$(evidence "$pcap.check")
  fi
  if [[ $c == cm_* ]]; then
    # The CM's messages as Wireshark names them; the answer must be there.
    local named
    if command -v tshark >/dev/null 2>&1; then
      named=$(tshark -r "$pcap" 2>/dev/null | grep -o 'CM: [A-Za-z]*' | sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $3}')
      [[ $named == *ConnectReply* || $named == *ServiceIDResReqResp* ]] || ok=0
      chk="$chk; tshark: ${named:-no CM message}"
    else
      chk="$chk; tshark step skipped: not installed"
    fi
  fi
  ((grc == 0 && hrc == 0 && n > 0)) || ok=0
  local cnps=
  if [[ $hook == ecn && -f $pcap.check ]]; then
    # Marks on what uroce received must have come back to rxe as CNPs.
    cnps=$(grep -c '^#[0-9]* PASS .* CNP ' "$pcap.check")
    [[ $dir == h2g ]] || ((cnps > 0)) || ok=0
    cnps=", $cnps CNPs"
  fi
  local verb=dropped
  [[ $hook == ecn ]] && verb="marked CE (input+output)" hook=
  local what="guest rc=$grc, host rc=$hrc, $n packets${drops:+, ${drops:-?} $verb${hook:+ on $hook}}$cnps; $chk"
  if ((ok)); then
    pass=$((pass + 1))
    echo "PASS $c $dir ($what)"
  else
    fail=$((fail + 1))
    echo "FAIL $c $dir ($what)"
    echo "   host: $(tail -n 3 "$hlog" 2>/dev/null | tr '\n' '|')"
    echo "   guest: $(sed -n '/RXEQ CMD BEGIN/,/RXEQ CMD EXIT/p' "$glog" 2>/dev/null | grep -v '^===\|^ *$' |
      tail -n 4 | tr '\n' '|')"
    echo "   capture: $pcap"
  fi
}

"$harness/netns.sh" up "$ns" >/dev/null || exit 1
ip netns exec "$ns" ethtool -K br0 tx off >/dev/null 2>&1
[[ -f $checker ]] || echo "SKIP step: roce_check.py on the captures: no $checker (../shared absent)"
for arg in "$@"; do
  c=${arg%%:*} d=${arg#*:}
  [[ $d == "$arg" ]] && d="g2h h2g"
  for dir in $d; do run_case "$c" "$dir"; done
done
echo "$pass passed, $fail failed"
((fail == 0))
