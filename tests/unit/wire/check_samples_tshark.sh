#!/usr/bin/env bash
# The codec's RC, UC and UD frames decoded by Wireshark's own dissector
# (../shared/wire/tshark_roce.sh, with the ICRC check from roce_icrc.lua):
# every frame must decode, with a good ICRC and nothing malformed. XRC frames
# are left out: tshark 4.0 does not know XRC opcodes.
# Skips (77) when tshark or the script is not there.
#   check_samples_tshark.sh WIRE_WRITE_SAMPLES SHARED_WIRE_DIR
set -euo pipefail
writer=$1 wire=$2
if [[ ! -x "$wire/tshark_roce.sh" ]] || ! command -v tshark >/dev/null; then
  echo "SKIP: no tshark or no $wire/tshark_roce.sh"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
UROCE_SAMPLES_NO_XRC=1 "$writer" "$tmp/samples.pcap"
out=$(bash "$wire/tshark_roce.sh" "$tmp/samples.pcap") || {
  echo "$out"
  exit 1
}
echo "$out" | tail -1
# RC 29, UC 14, UD 2 frames.
echo "$out" | tail -1 | grep -qx "45 passed, 0 failed"
