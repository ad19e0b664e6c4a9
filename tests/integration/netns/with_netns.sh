#!/usr/bin/env bash
# Runs a server/client test script (../debian/run_pair.sh,
# ../perftest/run_perftest.sh) across two "hosts": two network namespaces
# joined by a veth pair, each with its own uroced, so every packet between
# them is RoCE v2 over UDP on the veth. The addresses exist only inside
# the namespaces this script creates (and removes).
#
# Usage: with_netns.sh [--link xdp|udp|auto] [--loss PCT] [--out-loss PCT] [--faults SPEC] [--capture [--no-tshark]] [--ipv6-only] -- COMMAND...
#   --link L       which network link the RC and UC QPs use: xdp (default:
#                  AF_XDP, UROCE_LINK_XDP=require, so a QP that cannot have
#                  it fails: one process per side), udp (UDP sockets,
#                  UROCE_LINK_XDP=0) or auto (UROCE_LINK_XDP=1: the first
#                  process of a side on AF_XDP, the others on UDP sockets);
#                  UD QPs and the CM's messages always use UDP sockets
#   --loss PCT     nftables in both namespaces drop PCT % of the UDP port
#                  4791 datagrams they receive (numgen random; this kernel
#                  has no netem). Implies --link udp: AF_XDP frames pass
#                  no netfilter hook (the fault injector loses them instead)
#   --out-loss PCT the same for the datagrams they send, on their way out
#                  (after Linux built their IP headers: each such drop used
#                  an IP identification; sendmsg fails with EPERM)
#   --faults SPEC  uroce's own injector on both sides (UROCE_FAULTS=SPEC:
#                  drop=P,dup=P,reorder=P,corrupt=P,seed=N)
#   --ipv6-only    rnic0 gets no IPv4 address (uroce_rnic0's GID 1 is then
#                  fd77::x); the programs' own TCP exchange goes over a second
#                  veth pair, ctl0, with 10.78.0.1 / 10.78.0.2
#   --capture      both sides write every RoCE packet they send and receive
#                  (UROCE_CAPTURE) and dumpcap records the server's veth
#                  (where AF_XDP frames never show: no kernel tap sees them,
#                  so with --link xdp the veth's capture may hold none);
#                  every capture must pass ../../../../shared/wire/roce_check.py
#                  (0 failed) and tshark_roce.sh (0 failed, nothing malformed);
#                  without ../shared that step is skipped (one line says so)
#                  and each capture must still hold RoCE packets
#   --no-tshark    with --capture: roce_check.py only (Debian 12's Wireshark
#                  names the XRC opcodes but does not decode their headers:
#                  "opcode unknown to tshark")
#
# The server side is namespace S with 10.77.0.1 and fd77::1, the client side
# C with 10.77.0.2 and fd77::2; in each the interface is named rnic0, so the
# uroce device is uroce_rnic0 on both sides, with GID index 0 = the link-local
# fe80:: address (from the MAC), 1 = ::ffff:10.77.0.x, 2 = fd77::x (all
# RoCE v2; no duplicate address detection, so all are usable at once). The
# inner script learns the namespaces and the server address from
# UROCE_NETNS_SERVER, UROCE_NETNS_CLIENT, UROCE_SERVER_ADDR (../proc_lib.sh).
#
# Exit: the command's status; 1 if a capture check fails; 77 (skip) without
# root or network namespaces.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
wire_dir=${UROCE_SHARED_WIRE:-$here/../../../../shared/wire}

link=xdp
loss=
out_loss=
faults=
capture=0
v6only=0
tshark=1
while (($#)); do
  case $1 in
    --link) link=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --out-loss) out_loss=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --capture) capture=1; shift ;;
    --ipv6-only) v6only=1; shift ;;
    --no-tshark) tshark=0; shift ;;
    --) shift; break ;;
    *) echo "usage: $0 [--link xdp|udp|auto] [--loss PCT] [--out-loss PCT] [--faults SPEC] [--capture] [--no-tshark] [--ipv6-only] -- COMMAND..." >&2; exit 2 ;;
  esac
done
(($#)) || { echo "usage: $0 [--link xdp|udp|auto] [--loss PCT] [--out-loss PCT] [--faults SPEC] [--capture] [--no-tshark] [--ipv6-only] -- COMMAND..." >&2; exit 2; }
[[ $link == xdp || $link == udp || $link == auto ]] || { echo "with_netns.sh: --link xdp, udp or auto" >&2; exit 2; }
[[ -n $loss$out_loss ]] && link=udp

if ((EUID != 0)); then
  echo "SKIP: network namespaces need root"
  exit 77
fi
for tool in ip nft ethtool; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not installed (scripts/setup.sh)"; exit 77; }
done

tag=uroce$$
ns_s=$tag-s
ns_c=$tag-c
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-netns.XXXXXX")
cap_pid=

# shellcheck disable=SC2317 # called through the trap
cleanup() {
  local ns pid
  [[ -n $cap_pid ]] && kill "$cap_pid" 2>/dev/null && wait "$cap_pid" 2>/dev/null
  # Everything still running inside (the programs, each side's uroced) goes
  # with its namespace.
  for ns in "$ns_s" "$ns_c"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! ip netns add "$ns_s" 2>/dev/null || ! ip netns add "$ns_c" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces"
  exit 77
fi
for ns in "$ns_s" "$ns_c"; do
  # IPv6 addresses usable at once (no 1-2 s of tentative state): the
  # interfaces moved in take the namespace's defaults.
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0 || exit 1
done
ip link add "$tag"a type veth peer name "$tag"b || exit 1
ip link set "$tag"a netns "$ns_s" && ip link set "$tag"b netns "$ns_c" || exit 1
if ((v6only)); then
  ip link add "$tag"x type veth peer name "$tag"y || exit 1
  ip link set "$tag"x netns "$ns_s" && ip link set "$tag"y netns "$ns_c" || exit 1
  ip -n "$ns_s" link set "$tag"x name ctl0 && ip -n "$ns_c" link set "$tag"y name ctl0 || exit 1
  for side in s c; do
    ip -n "$tag-$side" addr add "10.78.0.$([[ $side == s ]] && echo 1 || echo 2)/24" dev ctl0 || exit 1
    ip -n "$tag-$side" link set ctl0 up || exit 1
  done
fi
for side in s c; do
  ns=$tag-$side
  dev=$tag$([[ $side == s ]] && echo a || echo b)
  host=$([[ $side == s ]] && echo 1 || echo 2)
  ip -n "$ns" link set "$dev" name rnic0 || exit 1
  ((v6only)) || ip -n "$ns" addr add 10.77.0."$host"/24 dev rnic0 || exit 1
  ip -n "$ns" addr add fd77::"$host"/64 dev rnic0 nodad || exit 1
  ip -n "$ns" link set rnic0 up && ip -n "$ns" link set lo up || exit 1
  # Checksums filled in by the kernel, not left for an offload that veth
  # never does (captures would show them unfinished).
  ip netns exec "$ns" ethtool -K rnic0 tx off >/dev/null 2>&1
  if [[ -n $loss$out_loss ]]; then
    ip netns exec "$ns" nft -f - <<EOF || exit 1
table inet uroce_loss {
  chain input {
    type filter hook input priority 0;
    ${loss:+udp dport 4791 numgen random mod 100 < $loss drop}
  }
  chain output {
    type filter hook output priority 0;
    ${out_loss:+udp dport 4791 numgen random mod 100 < $out_loss drop}
  }
}
EOF
  fi
done

export UROCE_NETNS_SERVER=$ns_s UROCE_NETNS_CLIENT=$ns_c UROCE_SERVER_ADDR=10.77.0.1
((v6only)) && export UROCE_SERVER_ADDR=10.78.0.1
case $link in
  xdp) export UROCE_LINK_XDP=require ;;
  udp) export UROCE_LINK_XDP=0 ;;
  auto) export UROCE_LINK_XDP=1 ;;
esac
[[ -n $faults ]] && export UROCE_FAULTS=$faults
# perftest's arithmetic under loss (see ../perftest/run_perftest.sh check_rows).
[[ -n $loss$out_loss$faults ]] && export PERFTEST_LOSSY=1
if ((capture)); then
  export UROCE_CAPTURE=$work/uroce-%p.pcap
  ip netns exec "$ns_s" dumpcap -q -i rnic0 -f "udp port 4791" -w "$work/veth.pcap" >/dev/null 2>&1 &
  cap_pid=$!
  # dumpcap creates its file once it captures.
  for _ in $(seq 100); do [[ -s $work/veth.pcap ]] && break; sleep 0.05; done
fi
echo "+ two hosts: $ns_s ($( ((v6only)) || echo "10.77.0.1, ")fd77::1) and $ns_c ($( ((v6only)) || echo "10.77.0.2, ")fd77::2) on a veth, link $link${loss:+, $loss % loss}${out_loss:+, $out_loss % loss on the way out}${faults:+, UROCE_FAULTS=$faults}"

"$@"
rc=$?

if ((capture)); then
  sleep 0.2
  kill "$cap_pid" 2>/dev/null && wait "$cap_pid" 2>/dev/null
  cap_pid=
  shopt -s nullglob
  caps=("$work"/*.pcap)
  ((${#caps[@]} >= 3)) || { echo "FAIL: expected both sides' captures and the veth's, got ${#caps[@]}"; rc=1; }
  # Without the independent checkers (../shared absent: a clone of the
  # repository alone) each capture must still hold RoCE packets.
  checkers=1
  if [[ ! -f $wire_dir/roce_check.py ]]; then
    checkers=0
    echo "SKIP step: capture checks (roce_check.py, tshark_roce.sh): no $wire_dir (../shared absent)"
  fi
  for f in "${caps[@]}"; do
    if ((!checkers)); then
      r=$(tshark -r "$f" -Y udp.port==4791 2>/dev/null | wc -l)
      ((r > 0)) || [[ $link != udp && $f == "$work/veth.pcap" ]] || rc=1
      echo "capture $(basename "$f"): $r RoCE packets (not checked)"
      continue
    fi
    r=$(python3 "$wire_dir/roce_check.py" --quiet "$f" | tail -1)
    if [[ $link != udp && $f == "$work/veth.pcap" && $r =~ ^0\ passed,\ 0\ failed$ ]]; then
      echo "capture veth.pcap: no RoCE frames (AF_XDP frames pass no kernel tap)"
      continue
    fi
    [[ $r =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]] || rc=1
    if ((tshark)); then
      t=$(bash "$wire_dir/tshark_roce.sh" "$f" | tail -1)
      [[ $t =~ ^[1-9][0-9]*\ passed,\ 0\ failed$ ]] || rc=1
    else
      t="not run (--no-tshark)"
    fi
    echo "capture $(basename "$f"): roce_check: $r; tshark: $t"
  done
fi
exit "$rc"
