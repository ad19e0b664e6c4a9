#!/usr/bin/env bash
# ibv_ud_pingpong with the largest message a UD datagram can carry on DEVICE:
# the port's active MTU, read from ibv_devinfo (4096 on lo).
# Usage: ud_pingpong.sh PORT DEVICE GID_INDEX   Exit: 0 pass, 1 fail, 77 skipped.
set -u
port=${1:?usage: ud_pingpong.sh PORT DEVICE GID_INDEX}
dev=${2:?usage: ud_pingpong.sh PORT DEVICE GID_INDEX}
gid=${3:?usage: ud_pingpong.sh PORT DEVICE GID_INDEX}
command -v ibv_devinfo >/dev/null 2>&1 || { echo "SKIP: ibv_devinfo not installed"; exit 77; }

# "active_mtu:  4096 (5)"
mtu=$(timeout --kill-after=5 20 ibv_devinfo -d "$dev" -i 1 |
  awk '$1 == "active_mtu:" { print $2; exit }')
if [[ ! "$mtu" =~ ^[0-9]+$ ]]; then
  echo "FAIL: could not read active_mtu of $dev from ibv_devinfo"
  exit 1
fi
echo "active_mtu of $dev: $mtu"
exec bash "$(dirname "$0")/run_pair.sh" "$port" ibv_ud_pingpong -d "$dev" -g "$gid" -s "$mtu"
