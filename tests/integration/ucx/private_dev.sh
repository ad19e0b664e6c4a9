#!/usr/bin/env bash
# Runs COMMAND in a private mount namespace whose /dev is this host's with an
# empty /dev/infiniband of its own, for the UCX tests: UCX uses an RDMA device
# only where /dev/infiniband/<dev_name> exists (docs/ucx.md), and a test
# must neither depend on nor change the host's. COMMAND makes what it needs
# there with `uroce devnodes`; all of it goes with the namespace.
#
# /dev itself is replaced (a tmpfs of links to the host's entries, which stay
# reachable under a private mount): a test cannot rely on /dev/infiniband
# being on the host to mount over it, and must not create it there.
#
# Usage: private_dev.sh COMMAND...
# Exit: COMMAND's status; 77 (skip) without root (mount namespaces).
set -u
if (($# == 0)); then
  echo "usage: $0 COMMAND..." >&2
  exit 2
fi
if ((EUID != 0)); then
  echo "SKIP: the UCX tests need root (a mount namespace with /dev/infiniband entries for UCX)"
  exit 77
fi
command -v unshare >/dev/null 2>&1 || { echo "SKIP: unshare (util-linux) not installed"; exit 77; }

top=$(mktemp -d "${TMPDIR:-/tmp}/uroce-dev.XXXXXX") || exit 1
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m --propagation private bash -c '
  set -e
  top=$1
  shift
  mount -t tmpfs -o mode=0700 tmpfs "$top"
  mkdir "$top/host" "$top/dev"
  mount --rbind /dev "$top/host"
  mount -t tmpfs -o mode=0755 tmpfs "$top/dev"
  for e in "$top"/host/* "$top"/host/.[!.]*; do
    name=${e##*/}
    [[ -e $e || -L $e ]] && [[ $name != infiniband ]] && ln -s "$e" "$top/dev/$name"
  done
  mkdir -m 0755 "$top/dev/infiniband"
  mount --move "$top/dev" /dev
  set +e
  "$@"
' private_dev "$top" "$@"
rc=$?
rmdir "$top" 2>/dev/null
exit "$rc"
