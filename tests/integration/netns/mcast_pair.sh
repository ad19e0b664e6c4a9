#!/usr/bin/env bash
# UD multicast between the two hosts of with_netns.sh: two receiving
# processes on the server's host and one on the client's attach to one
# group; a sender on the client's host sends 20 datagrams to it. Each
# receiver must get all 20, intact and in order (mcast_peer checks them):
# the remote host's two processes each get their copy, and so does the
# sender's own host (IP multicast loopback).
#
# Usage: mcast_pair.sh MCAST_PEER   Exit: 0 pass, 1 fail.
set -u
# shellcheck source=../proc_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../proc_lib.sh"

peer=${1:?usage: mcast_pair.sh MCAST_PEER}
dev=uroce_rnic0
group=239.7.7.7
n=20
scratch mcast

names=(server-1 server-2 client-1)
for name in "${names[@]}"; do
  if [[ $name == server-* ]]; then side=("${in_server[@]}"); else side=("${in_client[@]}"); fi
  "${side[@]}" "$peer" recv "$dev" "$group" "$n" "$work/$name.ready" >"$work/$name.out" 2>&1 &
  pids+=($!)
done
for _ in $(seq 200); do
  ready=0
  for name in "${names[@]}"; do [[ -e $work/$name.ready ]] && ((ready++)); done
  ((ready == ${#names[@]})) && break
  sleep 0.05
done

rc=0
if ! "${in_client[@]}" "$peer" send "$dev" "$group" "$n"; then
  echo "FAIL: the sender"
  rc=1
fi
for i in "${!names[@]}"; do
  wait "${pids[$i]}"
  r=$?
  echo "----- receiver ${names[$i]} (exit $r) -----"
  cat "$work/${names[$i]}.out"
  ((r == 0)) || rc=1
done
pids=()
((rc == 0)) && echo "PASS: every member got all $n datagrams"
exit "$rc"
