#!/usr/bin/env bash
# Demo: rdma-core's own ibv_rc_pingpong, the unmodified Debian binary, runs as
# server and client on this host over uroce, no RDMA hardware or kernel module.
#   1. scripts/setup.sh (Debian packages), 2. configure + build (dir `build`),
#   3. ibv_devices, 4. ibv_rc_pingpong server + client on uroce_lo, GID 1.
# Exits non-zero if any step fails. Every step runs under a timeout and the
# pingpong processes are stopped on exit (tests/integration/debian/run_pair.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build
port=${DEMO_PORT:-18515}

step() { printf '\n== %s\n' "$*"; }

step "setup: Debian packages"
bash scripts/setup.sh

step "configure + build ($build)"
# A tree configured before keeps its generator and options. UROCE_CMAKE_ARGS:
# extra CMake arguments, split into words on purpose.
# shellcheck disable=SC2086
if [[ -f $build/CMakeCache.txt ]]; then
  timeout 300 cmake -S . -B "$build" ${UROCE_CMAKE_ARGS:-}
else
  timeout 300 cmake -S . -B "$build" -G Ninja ${UROCE_CMAKE_ARGS:-}
fi
# Only what the demo needs: the drop-in library and the daemon.
timeout 1200 cmake --build "$build" --target ibverbs uroced

# The demo's own uroced (a daemon is found by name): it is started from this
# build by the library, and exits by itself once the demo is over.
export UROCE_DAEMON_NAME=demo-$$
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

step "LD_LIBRARY_PATH=$build/lib ibv_devices"
timeout --kill-after=5 30 ibv_devices

step "ibv_rc_pingpong -d uroce_lo -g 1: server, then client to localhost"
pingpong=$(command -v ibv_rc_pingpong) || { echo "demo: FAIL: ibv_rc_pingpong not found"; exit 1; }
echo "binary: $(dpkg -S "$pingpong" 2>/dev/null || echo "$pingpong")"
echo "loads:  $(ldd "$pingpong" | grep libibverbs)"
set +e
bash tests/integration/debian/run_pair.sh "$port" ibv_rc_pingpong -d uroce_lo -g 1
rc=$?
set -e

echo
if ((rc == 0)); then
  echo "demo: PASS: unmodified ibv_rc_pingpong server and client completed over uroce (uroce_lo, RoCE v2 GID ::ffff:127.0.0.1)"
else
  echo "demo: FAIL: ibv_rc_pingpong over uroce did not complete (run_pair.sh exit $rc, output above;"
  echo "      if port $port is taken, run with DEMO_PORT=<another port>)"
  exit 1
fi
