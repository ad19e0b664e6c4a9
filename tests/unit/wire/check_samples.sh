#!/usr/bin/env bash
# The codec's packets (one per opcode and service) judged by the independent
# checker ../shared/wire/roce_check.py: every packet must pass, in strict mode.
# Skips (77) when the checker is not there.
#   check_samples.sh WIRE_WRITE_SAMPLES SHARED_WIRE_DIR
set -euo pipefail
writer=$1 wire=$2
if [[ ! -r "$wire/roce_check.py" ]]; then
  echo "SKIP: no $wire/roce_check.py"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$writer" "$tmp/samples.pcap"
out=$(python3 "$wire/roce_check.py" --pmtu 256 --strict "$tmp/samples.pcap") || {
  echo "$out"
  exit 1
}
echo "$out" | tail -1
# All 74 frames (RC and XRC: 29 each, every opcode; UC 14; UD 2), none failed.
echo "$out" | tail -1 | grep -qx "74 passed, 0 failed"
