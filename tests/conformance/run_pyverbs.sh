#!/usr/bin/env bash
# Runs rdma-core's own test suite (pyverbs; Debian's python3-pyverbs ships it
# in /usr/share/doc/rdma-core/tests, partly gzipped) against the uroce library
# first on LD_LIBRARY_PATH (set by CTest), and fails unless it ends with 0
# failed, 0 errors, at least MIN_PASSED passed and every skip listed with its
# reason in docs/conformance.md (pyverbs_run.py judges).
#
# Usage: run_pyverbs.sh lo|netns MIN_PASSED [TEST...]
#   lo     on uroce_lo, as a user runs it: `run_tests.py --dev uroce_lo`
#   netns  on uroce_rnic0, a veth inside a network namespace this script
#          creates (and removes), with its own uroced, and with
#          UROCE_LINK=udp: the suite's QPs all live in one process, which
#          the default link would join through shared memory, so the
#          traffic is RoCE v2 over UDP on rnic0's address instead (root)
#   TEST   run only these (unittest names, e.g. tests.test_mr.MRTest)
#
# Exit: 0 pass, 1 fail, 77 skip (python3-pyverbs missing; netns without root).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
mode=${1:?usage: run_pyverbs.sh lo|netns MIN_PASSED [TEST...]}
min_passed=${2:?usage: run_pyverbs.sh lo|netns MIN_PASSED [TEST...]}
shift 2
suite_src=/usr/share/doc/rdma-core/tests
# Debian's interpreter, where python3-pyverbs installs the module (not a
# python3 that PATH may find first, e.g. from pyenv).
py=/usr/bin/python3

if [[ ! -f $suite_src/run_tests.py ]] || ! "$py" -c 'import pyverbs.device' 2>/dev/null; then
  echo "SKIP: python3-pyverbs is not installed (scripts/setup.sh installs it)"
  exit 77
fi
if [[ $mode == netns ]]; then
  if ((EUID != 0)); then
    echo "SKIP: the namespace variant needs root (network namespaces)"
    exit 77
  fi
  command -v ip >/dev/null 2>&1 || { echo "SKIP: ip not installed (scripts/setup.sh)"; exit 77; }
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-pyverbs.XXXXXX")
ns=
# shellcheck disable=SC2317 # called through the trap
cleanup() {
  local pid
  if [[ -n $ns ]]; then
    # The suite and the namespace's uroced go with the namespace.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

cp -r "$suite_src" "$work/tests" && gunzip -q "$work"/tests/*.gz || { echo "FAIL: cannot unpack $suite_src"; exit 1; }
# Bounded below CTest's TIMEOUT, so the namespace is always removed: a lost
# completion leaves some of the suite's tests blocked in ibv_get_cq_event.
# The suite finds a device's interface in /sys/class/infiniband/<dev>/device/net
# (test_rdmacm): `uroce sysfs` runs it where uroce's devices have entries there.
tool=${UROCE_TOOL:-$repo/build/bin/uroce}
[[ -x $tool ]] || { echo "FAIL: no uroce tool at $tool (set UROCE_TOOL)"; exit 1; }
run=("$tool" sysfs -- timeout -k 5 "${UROCE_PYVERBS_TIMEOUT:-240}" "$py" "$here/pyverbs_run.py" --suite "$work/tests"
  --min-passed "$min_passed" --skips-doc "$repo/docs/conformance.md" --results "$work/results.txt")

case $mode in
  lo)
    "${run[@]}" --dev uroce_lo "$@"
    ;;
  netns)
    ns=uroce$$-pyverbs
    veth=upv$$  # interface names have 15 characters at most
    if ! ip netns add "$ns" 2>/dev/null; then
      ns=
      echo "SKIP: cannot create a network namespace"
      exit 77
    fi
    # rnic0 (10.79.0.1, fd79::1) gets the device; its veth peer rnic1 stays
    # without addresses, so it gets none. No duplicate address detection:
    # the IPv6 GIDs are usable at once.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0 &&
      ip link add "$veth"a type veth peer name "$veth"b &&
      ip link set "$veth"a netns "$ns" && ip link set "$veth"b netns "$ns" &&
      ip -n "$ns" link set "$veth"a name rnic0 && ip -n "$ns" link set "$veth"b name rnic1 &&
      ip -n "$ns" addr add 10.79.0.1/24 dev rnic0 && ip -n "$ns" addr add fd79::1/64 dev rnic0 nodad &&
      ip -n "$ns" link set rnic0 up && ip -n "$ns" link set rnic1 up && ip -n "$ns" link set lo up ||
      { echo "FAIL: cannot set up the namespace's veth"; exit 1; }
    echo "+ namespace $ns: uroce_rnic0 on a veth (10.79.0.1, fd79::1), UROCE_LINK=udp"
    ip netns exec "$ns" env UROCE_LINK=udp "${run[@]}" --dev uroce_rnic0 "$@"
    ;;
  *)
    echo "usage: run_pyverbs.sh lo|netns MIN_PASSED [TEST...]" >&2
    exit 2
    ;;
esac
