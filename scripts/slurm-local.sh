#!/bin/sh
# A one-node Slurm cluster on this machine, to try `srun --mpi=pmix ppbench run ...` without a
# cluster (docs/multi-process.md, "Under Slurm"):
#
#   scripts/slurm-local.sh up [DIR]     # config, state and logs in DIR (default /tmp/ppbench-slurm)
#   export SLURM_CONF=DIR/slurm.conf    # as `up` prints
#   srun --mpi=pmix -O -N 1 -n 4 build/ppbench run ... --pp 2 --dp 2
#   scripts/slurm-local.sh down [DIR]    # and munged, where `up` started it
#
# Needs root and Debian's slurmctld, slurmd, slurm-client and munge (apt-get install slurmctld
# slurmd slurm-client munge); it installs nothing. One node with this machine's CPUs, one
# partition "local" that may oversubscribe them (srun -O), no cgroups, PMIx as srun's --mpi=pmix.
# Exit codes: 0 done; 2 a bad argument; 3 the machine cannot (not root, a program missing, a
# daemon that does not come up: its log is named).
set -u

die() {
  echo "slurm-local.sh: $2" >&2
  exit "$1"
}

case "${1:-}" in
  -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
[ $# -ge 1 ] && [ $# -le 2 ] || die 2 "usage: slurm-local.sh up|down [DIR]"
action=$1
dir=${2:-/tmp/ppbench-slurm}
case "$action" in
  up | down) ;;
  *) die 2 "unknown action '$action' (allowed: up, down)" ;;
esac
case "$dir" in
  /*) ;;
  *) die 2 "DIR '$dir' must be an absolute path (slurm.conf names it)" ;;
esac

# Stops the Slurm daemons, and munged where `up` started it (DIR/munged.ours).
stop() {
  for daemon in slurmd slurmctld; do
    if [ -f "$dir/$daemon.pid" ]; then
      kill "$(cat "$dir/$daemon.pid")" 2> /dev/null
      rm -f "$dir/$daemon.pid"
    fi
  done
  if [ -f "$dir/munged.ours" ]; then
    [ -f /run/munge/munged.pid ] && kill "$(cat /run/munge/munged.pid)" 2> /dev/null
    rm -f "$dir/munged.ours"
  fi
  return 0
}

# A failed `up` leaves nothing running.
fail() {
  stop
  die 3 "$1"
}

if [ "$action" = down ]; then
  stop
  exit 0
fi

[ "$(id -u)" = 0 ] || die 3 "the daemons run as root here"
for program in slurmctld slurmd sinfo srun munged pgrep; do
  command -v "$program" > /dev/null ||
    die 3 "no $program on PATH (Debian: apt-get install slurmctld slurmd slurm-client munge)"
done
stop
mkdir -p "$dir/state" "$dir/spool" "$dir/log" || die 3 "cannot make $dir"
host=$(hostname -s)
cat > "$dir/slurm.conf" << EOF
ClusterName=ppbench-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF

# munged insists on its own directories, owned by its user (Debian's package leaves /run/munge
# to systemd, which a container may not run).
if ! pgrep -x munged > /dev/null; then
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge 2> /dev/null
  runuser -u munge -- munged || fail "munged did not start (see /var/log/munge/munged.log)"
  touch "$dir/munged.ours"
fi

export SLURM_CONF="$dir/slurm.conf"
slurmctld || fail "slurmctld did not start (see $dir/log/slurmctld.log)"
slurmd || fail "slurmd did not start (see $dir/log/slurmd.log)"
tries=0
until sinfo -h -o %t 2> /dev/null | grep -q '^idle'; do
  tries=$((tries + 1))
  [ $tries -le 30 ] || fail "the node did not become idle in 30 s (see $dir/log/slurmd.log)"
  sleep 1
done
echo "export SLURM_CONF=$dir/slurm.conf"
