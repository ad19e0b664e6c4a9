#!/usr/bin/env bash
# Installs, from Debian 12 packages, what bench/run.sh needs on top of the
# build dependencies (scripts/setup.sh, which this calls first):
#   perftest           ib_send_lat, ib_write_bw, ...: uroce is measured with them
#   ucx-utils          ucx_perftest: UCX over shared memory (posix/sysv + cma) and tcp
#   libfabric-bin      fi_pingpong: libfabric over shm and tcp (Debian 12 ships no
#                      fabtests package, so fi_pingpong is the only libfabric tool)
#   qperf              tcp_lat / tcp_bw
#   gcc                the limit micro-benchmarks and the UDP ping-pong (bench/src/*.c)
#   python3-matplotlib the PNG plots (used through /usr/bin/python3)
# Idempotent: when everything is installed it touches nothing (no apt-get update).
set -euo pipefail
cd "$(dirname "$0")/.."

# One installer (scripts/setup.sh) for the build packages and these.
exec bash scripts/setup.sh perftest ucx-utils libfabric-bin qperf gcc python3-matplotlib
