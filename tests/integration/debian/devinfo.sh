#!/usr/bin/env bash
# ibv_devinfo -v (Debian's ibverbs-utils) on uroce's libibverbs.so.1: the
# device is there, its port is active, the link layer is Ethernet and GID[1]
# is the RoCE v2 IPv4-mapped GID of 127.0.0.1 (what `-g 1` selects in the
# other tests and in the README).
# Usage: devinfo.sh DEVICE   Exit: 0 pass, 1 fail, 77 skipped.
set -u
dev=${1:?usage: devinfo.sh DEVICE}
command -v ibv_devinfo >/dev/null 2>&1 || { echo "SKIP: ibv_devinfo not installed"; exit 77; }

out=$(timeout --kill-after=5 20 ibv_devinfo -v -d "$dev" 2>&1)
rc=$?
echo "$out"
if ((rc != 0)); then
  echo "FAIL: ibv_devinfo exited with $rc"
  exit 1
fi
ok=1
expect() {  # expect DESCRIPTION EXTENDED-REGEX
  if grep -Eq "$2" <<<"$out"; then
    echo "ok: $1"
  else
    echo "FAIL: $1 (no line matching /$2/)"
    ok=0
  fi
}
expect "device $dev present" "^hca_id:[[:space:]]+${dev}$"
expect "port 1 active" "^[[:space:]]+state:[[:space:]]+PORT_ACTIVE \(4\)$"
expect "link layer Ethernet" "^[[:space:]]+link_layer:[[:space:]]+Ethernet$"
expect "GID[1] is ::ffff:127.0.0.1, RoCE v2" \
  "^[[:space:]]+GID\[ *1\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2$"
((ok)) || exit 1
echo "PASS: ibv_devinfo -v -d $dev"
