#!/usr/bin/env bash
# Installs, from Debian 12 packages, everything needed to build and test uroce.
# Idempotent and non-interactive: when every package is already installed it
# touches nothing (no apt-get update), so running it again costs ~0.1 s.
# Runs as root (CI) or through sudo when available.
# Arguments name more packages to install with these (bench/setup.sh uses it).
# See the "Dependencies and why" table in README.md for what each package is for.
set -euo pipefail

packages=(
  # build
  g++ cmake ninja-build pkg-config
  # rdma-core's verbs and CM headers (we build against them; the real
  # libraries are never linked), its example programs, perftest, qperf and
  # libfabric's fi_pingpong: the unmodified binaries the integration tests
  # and the demo run
  libibverbs-dev librdmacm-dev ibverbs-utils perftest qperf libfabric-bin
  # fio and its rdma engine (librdmacm + libibverbs): tests/integration/fio
  fio
  # rdma-core's own test suite (pyverbs) and its Python bindings: the
  # conformance tests run it against uroce's library
  python3-pyverbs
  # test and library dependencies
  libgtest-dev googletest zlib1g-dev libisal-dev libfmt-dev libpcap-dev libcli11-dev
  # the AF_XDP link: libbpf loads uroced's XDP program (built by clang for
  # the BPF target), libxdp's xsk.h has the AF_XDP ring operations
  libbpf-dev libxdp-dev
  # the kernel's route and neighbour tables (the AF_XDP link's frame destinations)
  libnl-3-dev libnl-route-3-dev
  # tools the scripts and tests use; network namespaces for the multi-host
  # tests: veth pairs (iproute2), packet loss (nftables: this kernel has no
  # netem), checksum offload off on veth (ethtool)
  iproute2 procps python3 nftables ethtool
  # setcap: a file capability (CAP_NET_RAW) on a test program's copy
  # (tests/conformance/raw_setcap.sh)
  libcap2-bin
  # plain TCP programs run over rsockets under librspreload (tests/integration/rdmacm)
  socat iperf3
  # Wireshark's dissector, to judge the packets uroce writes (../shared/wire/tshark_roce.sh)
  tshark
  # UCX 1.13 (ucx_perftest) and Open MPI 4.1 (mpirun, and mpicc for the
  # tests' MPI program): the UCX tests (tests/integration/ucx)
  ucx-utils openmpi-bin libopenmpi-dev
  # style checks (.clang-format, .clang-tidy); clang + libFuzzer for the fuzz targets
  clang-format clang-tidy clang
  # the interop tests against the kernel's Soft-RoCE (tests/interop): the qemu
  # guest and what ../shared/interop/rxe-qemu/build-initramfs.sh puts in its
  # image (rxe's verbs provider, rdma-core's tools, busybox, tcpdump, ...)
  qemu-system-x86 busybox-static rdma-core ibverbs-providers rdmacm-utils
  tcpdump netcat-openbsd cpio kmod gzip
  # the Debian package's test: its man pages rendered with man -l
  # (tests/integration/debian_package; cpack and dpkg come with cmake and dpkg)
  man-db
  # callers' extra packages
  "$@"
)

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

missing=()
for p in "${packages[@]}"; do
  is_installed "$p" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

if [[ -r /etc/os-release ]]; then
  # shellcheck disable=SC1091
  . /etc/os-release
  if [[ "${ID:-}" != debian || "${VERSION_ID:-}" != 12 ]]; then
    echo "setup: warning: written for Debian 12, this is ${PRETTY_NAME:-unknown}" >&2
  fi
fi

as_root=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "setup: missing packages (${missing[*]}) and not root, no sudo: install them as root" >&2
    exit 1
  fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}"

for p in "${missing[@]}"; do
  is_installed "$p" || { echo "setup: $p still not installed" >&2; exit 1; }
done
echo "setup: done"
