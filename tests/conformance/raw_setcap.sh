#!/usr/bin/env bash
# CAP_NET_RAW as an unprivileged program gets it, from a file capability
# (setcap cap_net_raw+ep): uroced makes its raw QPs; the same program
# without the file capability is refused (EPERM). Root is made ordinary
# for the runs (SECBIT_NOROOT: uid 0 brings no capabilities at exec, none
# inherited), so the file capability is all there is — as for a user's
# program, and through the same exec-time rules.
# Usage: raw_setcap.sh CONFORMANCE_VERBS_TEST   (exit 77: not root, no
# setcap/setpriv, or a filesystem without file capabilities)
set -u
bin=${1:?usage: raw_setcap.sh CONFORMANCE_VERBS_TEST}
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (to set a file capability on a copy)"; exit 77; }
command -v setcap >/dev/null && command -v setpriv >/dev/null ||
  { echo "SKIP: setcap (libcap2-bin) or setpriv (util-linux) missing"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uroce-setcap.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$bin" "$tmp/plain" && cp "$bin" "$tmp/capped" || { echo "FAIL: cannot copy $bin"; exit 1; }
setcap cap_net_raw+ep "$tmp/capped" 2>/dev/null || { echo "SKIP: $tmp keeps no file capabilities"; exit 77; }
fail() {
  echo "FAIL: $*"
  echo "$out" | tail -20
  exit 1
}
ordinary() { setpriv --securebits=+noroot,+noroot_locked --inh-caps=-all --ambient-caps=-all -- "$@"; }
make_qp=RawEthernet.AFrameARuleClaimsArrivesWholeAndOthersDoNot

# Without the file capability: the process holds no CAP_NET_RAW (the raw
# cases skip), and uroced refuses its raw QP (the case that asks it).
out=$(ordinary "$tmp/plain" --gtest_filter="$make_qp" 2>&1)
grep -q 'SKIPPED \] 1 test' <<<"$out" || fail "without setcap the process still holds CAP_NET_RAW"
out=$(ordinary "$tmp/plain" --gtest_filter=RawPrivilege.WithoutCapNetRawNoRawQpIsMade 2>&1)
grep -q 'PASSED  \] 1 test' <<<"$out" || fail "without CAP_NET_RAW a raw QP was not refused"
# With it: raw QPs and rules are made, frames go.
out=$(ordinary "$tmp/capped" --gtest_filter="$make_qp" 2>&1)
grep -q 'PASSED  \] 1 test' <<<"$out" && ! grep -q SKIPPED <<<"$out" ||
  fail "with setcap cap_net_raw+ep the raw QP was refused"
echo "PASS: refused without the file capability, allowed with it"
