#!/usr/bin/env bash
# Runs our MPI program (mpi_check.c: ping-pong, a streamed 1 MiB transfer,
# MPI_Allreduce, MPI_Alltoall, every element checked) with Open MPI's mpirun
# (Debian openmpi-bin 4.1, unmodified) and `--mca pml ucx`, over uroce.
#
# Usage: mpi_run.sh NP [UCX_TLS=...]
#   One host: NP ranks here, on uroce_lo (its /dev/infiniband entry made
#   with `uroce devnodes uroce_lo`, inside private_dev.sh). UCX_TLS=... is
#   passed to the ranks (tests.cmake says why the one-host tests name
#   transports).
#   Two hosts (inside with_netns.sh): NP/2 ranks on host s, where mpirun
#   runs, and NP/2 on host c, started through rsh_agent.sh (ucx_lib.sh
#   host_argv); UCX with no UCX_* variable at all, the entries those of
#   `uroce devnodes` (uroce_rnic0); and each side must have received at
#   least 4 MiB of RoCE v2 datagrams (nftables): what mpi_check streams from
#   a rank of one host to one of the other (3 x 1 MiB + 1 MiB) went over
#   uroce's network link.
#
# Pass: mpirun exits 0 and rank 0 prints "mpi_check: PASS (NP ranks)".
# Exit: 0 pass, 1 fail, 77 skipped (mpirun not installed, or mpi_check not
# built: mpicc was missing when the tree was configured). Bounded by
# MPI_RUN_TIMEOUT_S (default 150) seconds.
set -u
# shellcheck source=ucx_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ucx_lib.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if (($# < 1)); then
  echo "usage: $0 NP [UCX_TLS=...]" >&2
  exit 2
fi
np=$1
tls=${2-}
limit_s=${MPI_RUN_TIMEOUT_S:-150}
ucx_require mpirun
if [[ -z ${MPI_CHECK-} || ! -x ${MPI_CHECK-} ]]; then
  echo "SKIP: mpi_check not built (mpicc, Debian package libopenmpi-dev, was missing at configure time)"
  exit 77
fi

scratch ucx-mpi
args=(--mca pml ucx -np "$np")
((EUID == 0)) && args+=(--allow-run-as-root)
for v in LD_LIBRARY_PATH UROCE_DAEMON_NAME UROCED_IDLE_MS UROCE_UROCED; do
  [[ -n ${!v-} ]] && args+=(-x "$v")
done

if two_hosts; then
  per=$((np / 2))
  host_argv s
  "${host[@]}" "$UROCE_CLI" devnodes || exit 1
  roce_count_start || exit 1
  args+=(--host "hosts:$per,hostc:$per" --mca plm_rsh_agent "$here/rsh_agent.sh")
  run=("${host[@]}")
else
  devnodes uroce_lo || exit 1
  # More ranks than this machine has cores.
  args+=(--oversubscribe)
  [[ -n $tls ]] && args+=(-x "$tls")
  run=()
fi

echo "+ mpirun ${args[*]} $MPI_CHECK"
"${run[@]}" timeout -k 10 "$limit_s" mpirun "${args[@]}" "$MPI_CHECK" >"$work/mpi.out" 2>&1 &
pids+=($!)
wait "${pids[0]}"
rc=$?
cat "$work/mpi.out"
if ((rc == 124 || rc == 137)); then
  echo "FAIL: mpirun still running after $limit_s s"
  exit 1
fi
if ((rc != 0)) || ! grep -q "^mpi_check: PASS ($np ranks)" "$work/mpi.out"; then
  echo "FAIL: mpirun exit status $rc"
  exit 1
fi
if two_hosts; then
  for side in s c; do
    read -r pk by <<<"$(roce_received "$side")"
    echo "RoCE v2 datagrams host $side received: $pk ($by bytes)"
    if ((by < 4 * 1024 * 1024)); then
      echo "FAIL: less than 4 MiB over uroce's network link to host $side"
      exit 1
    fi
  done
fi
echo "PASS"
