#!/usr/bin/env bash
# mpirun's remote shell for the two-host MPI test (mpi_run.sh, --mca
# plm_rsh_agent): "rsh_agent.sh HOST COMMAND..." runs COMMAND (Open MPI's
# daemon, orted) on "host" HOST of with_netns.sh: hosts or hostc
# (ucx_lib.sh host_argv), as ssh would on a real host.
set -u
# shellcheck source=ucx_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ucx_lib.sh"
case ${1-} in
  hosts) host_argv s ;;
  hostc) host_argv c ;;
  *)
    echo "rsh_agent.sh: unknown host '${1-}' (hosts or hostc)" >&2
    exit 1
    ;;
esac
shift
# Like ssh, the command arrives as words of one shell command line.
exec "${host[@]}" bash -c "$*"
