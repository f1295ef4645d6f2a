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
# Each node always gets a temporary directory of its own (TMPDIR), as each machine has its own
# /tmp; see below.
#
# Three things that differ between real machines can be made to differ here too, in Linux
# namespaces (as root), each off unless asked for:
#   PPBENCH_AGENT_HOSTNAMES=1            each node runs under its own hostname, the hostfile's;
#   PPBENCH_AGENT_CLOCKS="node-b=1000"   a node's monotonic clock runs that many whole seconds
#                                        ahead (a time namespace), as two machines' clocks
#                                        disagree; space-separated NAME=SECONDS entries;
#   PPBENCH_AGENT_NETNS=1                each node runs in the network namespace of its name,
#                                        made by scripts/emulated-nodes.sh: its own network,
#                                        a link of known rate to the others.
# ppbench measures each process's clock offset at start-up and removes it from the job's trace;
# tests/cli/test_mpi_cli.py checks that under a skewed clock.
#
# `mpi-local-agent.sh --namespaces-allowed` exits 0 where the hostname and clock namespaces
# can be made here, else 3 (the tests and scripts/explore_runs.py ask before they use them).
#
# OpenMPI calls an rsh/ssh agent as `AGENT [ssh options] HOST COMMAND...`: the options are
# dropped and the command runs here, for HOST.
if [ "$#" = 1 ] && [ "$1" = --namespaces-allowed ]; then
  unshare --uts --time --monotonic 1 true > /dev/null 2>&1 || exit 3
  exit 0
fi
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
host=$1
shift

ahead=0
set -f # the entries are words, not file patterns
for entry in ${PPBENCH_AGENT_CLOCKS:-}; do
  case "$entry" in
    *=*[!0-9]* | *= | =* | *=??????????*)
      echo "mpi-local-agent.sh: PPBENCH_AGENT_CLOCKS entry '$entry' is not NAME=SECONDS (whole seconds, 0 to 999999999)" >&2
      exit 2
      ;;
    "$host="*) ahead=${entry#*=} ;;
    *=*) ;;
    *)
      echo "mpi-local-agent.sh: PPBENCH_AGENT_CLOCKS entry '$entry' is not NAME=SECONDS (whole seconds, 0 to 999999999)" >&2
      exit 2
      ;;
  esac
done
set +f

# Each node its own temporary directory, as each machine has its own /tmp. A daemon makes its
# session directory there, under a name built from the machine's hostname and the job: two
# daemons of one job under one hostname made the same directories at the same moment, and the
# one that lost the race left without a word (Open MPI 4.1.4, about 1 launch in 15 on two busy
# cores) while mpirun waited for it for ever.
TMPDIR="${TMPDIR:-/tmp}/ppbench-$(id -u)-node-$host"
mkdir -p "$TMPDIR" || {
  echo "mpi-local-agent.sh: cannot make the node's temporary directory $TMPDIR" >&2
  exit 3
}
export TMPDIR

netns=""
if [ "${PPBENCH_AGENT_NETNS:-0}" = 1 ]; then
  [ -e "/var/run/netns/$host" ] || {
    echo "mpi-local-agent.sh: no network namespace '$host' (make it: scripts/emulated-nodes.sh up $host ...)" >&2
    exit 3
  }
  netns="ip netns exec $host"
fi
namespaces=""
[ "${PPBENCH_AGENT_HOSTNAMES:-0}" = 1 ] && namespaces="--uts"
[ "$ahead" -gt 0 ] && namespaces="$namespaces --time --monotonic $ahead --boottime $ahead"
# shellcheck disable=SC2086 # the namespace commands are words
[ -n "$namespaces" ] || exec $netns /bin/sh -c "$*"

# shellcheck disable=SC2086
exec $netns unshare $namespaces /bin/sh -c '
  if [ "$1" = rename ]; then hostname "$2" || exit 3; fi
  exec /bin/sh -c "$3"' mpi-local-agent.sh \
  "$([ "${PPBENCH_AGENT_HOSTNAMES:-0}" = 1 ] && echo rename || echo keep)" "$host" "$*"
