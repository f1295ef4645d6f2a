#!/bin/sh
# A launch agent for OpenMPI that starts a "remote" node's daemon on this machine, so that a
# hostfile naming several nodes runs them all here: OpenMPI then places, numbers and connects the
# processes exactly as on a cluster (a node's own local ranks, TCP between nodes), which lets a
# multi-node launch be tried and tested without a second machine.
#
#   mpirun -np 4 --hostfile hosts --mca plm_rsh_agent scripts/mpi-local-agent.sh \
#       --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca rtc_hwloc_vmhole none \
#       ppbench run ... --pp 2 --dp 2
#
# with `hosts` holding two lines such as "node-a slots=2" and "node-b slots=2" (the names need
# not resolve). The two --mca options keep the "nodes" from meeting in shared memory, which
# Open MPI does not expect of two nodes. See docs/multi-process.md ("Two nodes on one machine").
#
# OpenMPI calls an rsh/ssh agent as `AGENT [ssh options] HOST COMMAND...`: the options and the
# host are dropped and the command runs here.
while [ $# -gt 0 ]; do
  case "$1" in
    -o | -l | -p | -i) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || {
  echo "mpi-local-agent.sh: expected HOST COMMAND..., got: $*" >&2
  exit 2
}
shift # the host
exec /bin/sh -c "$*"
