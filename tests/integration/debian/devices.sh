#!/usr/bin/env bash
# ibv_devices (Debian's ibverbs-utils) run on uroce's libibverbs.so.1 must list
# the loopback device.
# Usage: devices.sh DEVICE   Exit: 0 pass, 1 fail, 77 skipped.
set -u
dev=${1:?usage: devices.sh DEVICE}
command -v ibv_devices >/dev/null 2>&1 || { echo "SKIP: ibv_devices not installed"; exit 77; }

out=$(timeout --kill-after=5 20 ibv_devices 2>&1)
rc=$?
echo "$out"
if ((rc != 0)); then
  echo "FAIL: ibv_devices exited with $rc"
  exit 1
fi
# Rows are "<tab-or-spaces>name<spaces>guid"; match the name as a whole word.
if ! grep -Eq "^[[:space:]]+${dev}[[:space:]]+[0-9a-f]{16}$" <<<"$out"; then
  echo "FAIL: $dev not listed"
  exit 1
fi
echo "PASS: ibv_devices lists $dev"
