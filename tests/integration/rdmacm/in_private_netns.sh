#!/usr/bin/env bash
# Runs a command in a network namespace of its own with lo and a veth
# interface d0 (10.9.0.1/24, fd09::1/64; its peer d1 has no address), all
# up: uroce then has exactly the devices uroce_lo and uroce_d0, and no route
# leads off this host. The command runs as the first process of a PID
# namespace of its own too (with its own /proc), so whatever it leaves
# running (a server's forked children, a daemon) dies with it; the network
# namespace goes away then.
#
# Usage: in_private_netns.sh COMMAND...
# Exit: the command's; 77 (skip) if no network namespace can be made (not
# root, and no user namespaces either).
set -u
if (($# == 0)); then
  echo "usage: $0 COMMAND..." >&2
  exit 2
fi
ns=(unshare --net --pid --fork --kill-child --mount-proc)
((EUID == 0)) || ns=(unshare --map-root-user --net --pid --fork --kill-child --mount-proc)
if ! "${ns[@]}" true 2>/dev/null; then
  echo "SKIP: cannot create a network namespace (${ns[*]})"
  exit 77
fi
exec "${ns[@]}" bash -c '
  set -e
  ip link set lo up
  ip link add d0 type veth peer name d1
  ip link set d1 up
  ip addr add 10.9.0.1/24 dev d0
  ip addr add fd09::1/64 dev d0 nodad
  ip link set d0 up
  exec "$@"' in_private_netns "$@"
