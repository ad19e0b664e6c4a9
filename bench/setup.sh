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

bash scripts/setup.sh

packages=(perftest ucx-utils libfabric-bin qperf gcc python3-matplotlib)

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

missing=()
for p in "${packages[@]}"; do
  is_installed "$p" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "bench/setup: all ${#packages[@]} benchmark packages already installed"
  exit 0
fi

as_root=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "bench/setup: missing packages (${missing[*]}) and not root, no sudo: install them as root" >&2
    exit 1
  fi
fi

echo "bench/setup: installing ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}"
