#!/usr/bin/env bash
# Kernel Soft-RoCE's connection set-up, for bench/harness.py's group "cm":
# rdmacm-utils' cmtime, server and client both in the qemu guest of
# ../shared/interop/rxe-qemu over its rxe0 (10.77.0.2), the kernel's CM and
# rdma_rxe doing the work. Prints "== cmtime -c N" and "== cmtime -c 1", each
# followed by cmtime's table.
#
# The guest runs under TCG here (no KVM on this machine): every instruction
# is emulated, so its numbers say what the kernel's path costs on a much
# slower CPU, not what rxe does on this one (bench/RESULTS.md).
#
# Usage: rxe_cmtime.sh [N]   (N connections at once; default 1000)
# Exit: 0, 1 (the guest or cmtime failed), 77 (no ../shared harness or not root).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
harness=${UROCE_RXE_HARNESS:-$here/../../shared/interop/rxe-qemu}
n=${1:-1000}
[[ -x $harness/up.sh ]] || { echo "SKIP: no rxe-qemu harness at $harness"; exit 77; }
((EUID == 0)) || { echo "SKIP: the guest's network namespace needs root"; exit 77; }
# A cache of its own: cmtime is not in the harness's default image.
export RXEQ_CACHE=${RXEQ_BENCH_CACHE:-/var/tmp/rxe-qemu-bench} RXEQ_EXTRA=cmtime
"$harness/netns.sh" up >/dev/null || exit 1
trap '"$harness/netns.sh" down >/dev/null 2>&1' EXIT
# -c N first: after cmtime's server has served a single connection, its
# rdma_create_qp fails (ENOENT) for every later one in this guest (seen
# 2026-11-26; the other order works).
"$harness/up.sh" --net tap --netns rxeq --tap tap0 --ip 10.77.0.2/24 --timeout 900 \
  "ulimit -l unlimited; cmtime -b 10.77.0.2 >/tmp/server.log 2>&1 & sleep 2;
   echo '== cmtime -c $n'; cmtime -s 10.77.0.2 -c $n || exit 1;
   echo '== cmtime -c 1'; cmtime -s 10.77.0.2 -c 1; rc=\$?; kill %1;
   echo '== the server said:'; sort /tmp/server.log | uniq -c | head -5; exit \$rc" 2>&1 |
  sed -n '/RXEQ CMD BEGIN/,/RXEQ CMD EXIT/p'
exit "${PIPESTATUS[0]}"
