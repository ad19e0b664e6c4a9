#!/usr/bin/env bash
# Interoperability with the Linux kernel's Soft-RoCE: uroce (BUILD/lib) on
# the host against rdma_rxe in a qemu TCG guest running Debian 12's kernel,
# through the harness ../shared/interop/rxe-qemu (its README.md):
#   1. the harness's own 28 cases (test-uroce-rxe.sh: pingpongs and perftest,
#      both directions);
#   2. ours (rxe_cases.sh: RC through loss, 4 QPs, bidirectional, multicast,
#      connections through the RDMA CM);
# both on the UDP-socket link and again on the AF_XDP link (below).
# Skipped, with one line saying why (exit 77), when not root, without the
# harness (../shared absent: a clone of the repository alone), or when the
# guest does not boot (no qemu, no image).
#
# Usage: rxe_interop.sh BUILD_DIR. Namespace rxeq is this script's alone: it
# is made by the harness and removed here at the end, with whatever still
# runs in it. Exit: 0 all passed, 1 a case failed, 77 skipped.
# Bounded: every guest run has up.sh's timeout; the harness's cases and ours
# bound every command with `timeout` (rxe's retry_cnt 7 retries forever).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: rxe_interop.sh BUILD_DIR}" && pwd) || exit 2
harness=${UROCE_RXE_HARNESS:-$here/../../../shared/interop/rxe-qemu}
ns=rxeq
export RXEQ_CACHE=${RXEQ_CACHE:-/var/tmp/rxe-qemu}

if ((EUID != 0)); then
  echo "SKIP rxe interop: needs root (network namespace, taps, nftables)"
  exit 77
fi
if [[ ! -x $harness/test-uroce-rxe.sh ]]; then
  echo "SKIP rxe interop: no harness at $harness (../shared absent)"
  exit 77
fi
# One image for both runs: it holds our multicast peer (see rxe_cases.sh).
# The guest mounts tmpfs over /tmp, /run and /dev/shm, which would hide a
# build tree there (a clone under /tmp): the image takes the copy kept in
# the cache (copied when it changed, so that an unchanged peer leaves the
# image as it is).
mkdir -p "$RXEQ_CACHE/logs" "$RXEQ_CACHE/peer"
peer=$RXEQ_CACHE/peer/rxe_mcast_peer
cmp -s "$build/bin/rxe_mcast_peer" "$peer" || cp "$build/bin/rxe_mcast_peer" "$peer" || exit 2
export RXEQ_EXTRA="$peer rstream riostream"
if ! "$harness/build-initramfs.sh" >"$RXEQ_CACHE/logs/image-build.log" 2>&1; then
  echo "SKIP rxe interop: the guest's image could not be built (log: $RXEQ_CACHE/logs/image-build.log)"
  exit 77
fi
if ! "$harness/up.sh" --name boot-check --timeout 120 true >/dev/null 2>&1; then
  echo "SKIP rxe interop: qemu cannot start the guest (log: $RXEQ_CACHE/logs/boot-check.log)"
  exit 77
fi
# Every capture, the harness's and ours, by a tcpdump that writes each packet
# as it comes (capture/tcpdump says why). Only now: the image (built above,
# then up to date for every guest) takes the tcpdump it finds in PATH.
UROCE_REAL_TCPDUMP=$(command -v tcpdump) || { echo "SKIP rxe interop: no tcpdump"; exit 77; }
export UROCE_REAL_TCPDUMP PATH=$here/capture:$PATH

# Each part runs as a background job, so that a TERM (test.sh's timeout)
# interrupts the wait at once: the part is stopped (its own trap stops what
# it started), then whatever still runs in the namespace.
part=
# shellcheck disable=SC2317 # called through the trap
cleanup() {
  local pid
  [[ -n $part ]] && kill "$part" 2>/dev/null && sleep 1
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  "$harness/netns.sh" down "$ns" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 1' INT TERM
run_part() {
  "$@" &
  part=$!
  wait "$part"
  local r=$?
  part=
  return "$r"
}

# Two passes: uroce's RC and UC QPs on UDP sockets (UROCE_LINK_XDP=0), then
# on the AF_XDP socket uroced (root here) lends for br0 (require: a QP that
# cannot have it fails, no silent fallback). The AF_XDP pass captures on
# tap0 (capture/tcpdump says why) and leaves out the nftables-loss cases
# (AF_XDP frames pass no netfilter hook) and multicast (UD: UDP sockets).
rc=0
for link in udp xdp; do
  if [[ $link == udp ]]; then
    export UROCE_LINK_XDP=0
    unset UROCE_TCPDUMP_IFACE
    ours=()
  else
    export UROCE_LINK_XDP=require UROCE_TCPDUMP_IFACE=tap0
    ours=(qp4_write_bw qp4_read_bw bidir_send_bw bidir_write_bw cm_rping cm_ucmatose cm_udaddy cm_send_bw
      cm_rstream cm_riostream)
  fi
  echo "-- [$SECONDS s] link $link: the harness's cases: test-uroce-rxe.sh (captures in $RXEQ_CACHE/uroce-rxe)"
  run_part "$harness/test-uroce-rxe.sh" "$build/lib" 2>&1 || rc=1
  echo "-- [$SECONDS s] link $link: our cases: rxe_cases.sh (captures in $RXEQ_CACHE/uroce-cases)"
  run_part bash "$here/rxe_cases.sh" "$build/lib" "$peer" "${ours[@]}" || rc=1
done
echo "-- [$SECONDS s] rxe interop: $( ((rc == 0)) && echo passed || echo FAILED)"
exit "$rc"
