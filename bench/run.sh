#!/usr/bin/env bash
# bench/run.sh - uroce beside the peers a user would pick instead and the
# physical limits, in one go on this machine:
#   1. bench/setup.sh (Debian packages: perftest, ucx-utils, libfabric-bin,
#      qperf, gcc, python3-matplotlib), builds uroce (build/: libibverbs.so.1 + uroced),
#      copies those two into the output directory (what is measured cannot change
#      under the run) and compiles bench/src/*.c;
#   2. bench/harness.py: uroce under the unmodified perftest tools (uroce_lo, -x 1),
#      UCX ucx_perftest (shm: posix/sysv + cma; tcp), libfabric fi_pingpong (shm, tcp),
#      qperf tcp, a raw UDP ping-pong, and the limits (memcpy, cache-line round
#      trip, shm ping-pong, one process_vm_writev/readv); server and client
#      pinned to different CPUs; every pass runs everything once;
#   3. bench/report.py: the table (stdout), PNG plots, bench/RESULTS.md and bench/plots/.
# Everything runs on 127.0.0.1, shared memory or in network namespaces of its
# own (group veth), under timeouts, and every process the harness starts is
# ended by its process group. Not a test: nothing here is registered with CTest.
#
# Usage: bench/run.sh [-r N] [-o DIR] [-g GROUPS] [--quick] [--no-setup] [--no-build]
#                     [--no-sweeps] [--no-results]
#   -r N          passes (default 3); the table shows medians with [min-max]
#   -o DIR        output directory (default bench/out/<timestamp>): raw.tsv, logs/,
#                 bin/, table.md, latency.png, bandwidth.png
#   -g GROUPS     comma list of limits,uroce,uroce_udp,ucx,fabric,qperf,udp,cm,veth,raw (default: all;
#                 uroce_udp: the same perftest tools over the network link, UROCE_LINK=udp;
#                 veth: two network namespaces joined by a veth pair, root only: raw UDP
#                 and raw AF_XDP ping-pongs, uroce's UDP link under perftest, qperf tcp;
#                 cm: connection set-up, cmtime over uroce's librdmacm beside TCP connects;
#                 raw: raw Ethernet between the veth namespaces, perftest's raw_ethernet_* on
#                 uroce beside an AF_PACKET pair and the raw AF_XDP ping-pong)
#   --quick       1 pass, 1/10 of the iterations; implies --no-results
#   --no-results  leave bench/RESULTS.md and bench/plots/ alone
#   --no-sweeps   skip the size sweeps (plots then show only the table's sizes)
# Environment: SRV_CPU=0 CLI_CPU=1 (pinning), RUN_TMO=60 (s per run),
#   QUIET_MAX=20 QUIET_WAIT=20 QUIET_TOTAL=240 (before each run wait up to QUIET_WAIT s
#   for the machine to be below QUIET_MAX % busy and for the VM's fast cross-core
#   mode, at most QUIET_TOTAL s in all; each run records what other workloads
#   took during it, and the report prefers undisturbed runs),
#   BENCH_BUDGET=3600 (s, hard bound on the whole measurement), PORT_BASE=47100.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)
cmdline="bench/run.sh${*:+ $*}"

reps=3
out=
groups=
quick=0
setup=1
build=1
results=1
sweeps=1
while (($#)); do
  case $1 in
    -r) reps=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -g) groups=$2; shift 2 ;;
    --quick) quick=1; reps=1; results=0; shift ;;
    --no-setup) setup=0; shift ;;
    --no-build) build=0; shift ;;
    --no-results) results=0; shift ;;
    --no-sweeps) sweeps=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
out=${out:-$root/bench/out/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/bin" "$out/logs"
out=$(cd "$out" && pwd)
say() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if ((setup)); then
  say "setup: Debian packages"
  timeout 1800 bash bench/setup.sh
fi

if ((build)); then
  say "build: uroce (build/)"
  if [[ -f build/CMakeCache.txt ]]; then
    timeout 600 cmake -S . -B build >"$out/logs/cmake.log"
  else
    timeout 600 cmake -S . -B build -G Ninja >"$out/logs/cmake.log"
  fi
  # What perftest and cmtime need: the drop-in libraries and the daemon; the
  # raw AF_XDP ping-pong (built from uroce's AF_XDP pieces).
  timeout 1800 cmake --build build --target ibverbs rdmacm uroced xdp_pingpong >>"$out/logs/cmake.log" 2>&1 ||
    { tail -30 "$out/logs/cmake.log" >&2; exit 1; }
fi
[[ -e build/lib/libibverbs.so.1 && -x build/bin/uroced ]] ||
  { echo "run.sh: build/lib/libibverbs.so.1 or build/bin/uroced missing (drop --no-build)" >&2; exit 1; }
# Snapshot of what is measured: build/ may be rebuilt while the benchmark runs.
# The library finds its daemon at ../bin/uroced, so the layout is kept.
snap=$out/uroce
mkdir -p "$snap/lib" "$snap/bin"
cp -a build/lib/libibverbs.so* build/lib/librdmacm.so* "$snap/lib/"
cp -a build/bin/uroced "$snap/bin/"
[[ -s $snap/lib/libibverbs.so.1 && -x $snap/bin/uroced ]] ||
  { echo "run.sh: incomplete copy of build/ (being rebuilt?); run again" >&2; exit 1; }
{
  echo "commit: $(git log -1 --format='%h %s' 2>/dev/null || echo unknown)"
  git status --porcelain -- src include CMakeLists.txt cmake 2>/dev/null | sed 's/^/uncommitted: /'
  echo "libibverbs.so.1 sha256: $(sha256sum "$snap/lib/libibverbs.so.1" | cut -d' ' -f1)"
} >"$snap/VERSION"

cp -a build/bin/xdp_pingpong "$out/bin/" 2>/dev/null || true
say "compile: bench/src -> $out/bin"
for src in bench/src/*.c; do
  name=$(basename "$src" .c)
  # (those bench/CMakeLists.txt builds against uroce's libibverbs are in build/bin)
  grep -q "src/$name.c" bench/CMakeLists.txt && continue
  gcc -O2 -Wall -Wextra -pthread -o "$out/bin/$name" "$src"
done

harness=(/usr/bin/python3 bench/harness.py --out "$out" --bin "$out/bin" --uroce "$snap" -r "$reps")
((quick)) && harness+=(--quick)
((sweeps)) || harness+=(--no-sweeps)
[[ -n $groups ]] && harness+=(--groups "$groups")
say "measure: ${harness[*]}"
# The harness ends its own processes on SIGTERM; the budget bounds the whole run.
timeout --kill-after=60 "${BENCH_BUDGET:-3600}" "${harness[@]}" || {
  rc=$?
  say "harness exited with $rc; reporting what was measured"
}

elapsed=$(($(date +%s) - start))
report=(/usr/bin/python3 bench/report.py --out "$out" --elapsed "$elapsed" --command "$cmdline"
  --cpus "${SRV_CPU:-0},${CLI_CPU:-1}")
((results)) || report+=(--no-results)
"${report[@]}"
say "done in $((elapsed / 60)) min $((elapsed % 60)) s; raw data and logs in $out"
