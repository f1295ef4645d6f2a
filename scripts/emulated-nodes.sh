#!/bin/sh
# Emulated cluster nodes on this machine, each with a network of its own: one Linux network
# namespace per node, joined to the others by a bridge, every node's outgoing traffic shaped to a
# given rate (a token bucket, tc's tbf), as a node's NIC would be. With scripts/mpi-local-agent.sh
# and PPBENCH_AGENT_NETNS=1, OpenMPI starts each node's processes inside its namespace, so that
# the traffic between nodes crosses a link of known rate while a node's own processes talk
# without it (docs/multi-process.md, "Two nodes on one machine").
#
#   scripts/emulated-nodes.sh up [--rate RATE] [--burst BYTES] NODE...   # e.g. up node-0 node-1
#   scripts/emulated-nodes.sh down NODE...
#
# RATE is a whole number and bit, kbit, mbit or gbit, as tc writes it (e.g. 100mbit, 1gbit,
# 10gbit; default 1gbit). BYTES is the token bucket's depth: what may leave at once, faster than
# RATE, after an idle moment (default 250 us of RATE, at least 16 KiB; 2048 to 1073741824).
# Node k gets 10.77.0.(k+2)/24 on its eth0, the bridge (ppbench-br0) 10.77.0.1; `up` prints the
# addresses, the shaping, and the mpirun options that keep OpenMPI's traffic on them. `up` first
# removes what a previous `up` of the same names left.
# Needs root, iproute2 (ip, tc) and a kernel with network namespaces, veth, bridges and tbf.
# Exit codes: 0 done; 2 a bad argument; 3 the machine cannot (not root, no ip or tc, refused).
set -u

BRIDGE=ppbench-br0
SUBNET=10.77.0
RATE=1gbit

die() {
  echo "emulated-nodes.sh: $2" >&2
  exit "$1"
}

usage="usage: emulated-nodes.sh up [--rate RATE] [--burst BYTES] NODE... | down NODE..."
[ $# -ge 1 ] || die 2 "$usage"
action=$1
shift
case "$action" in
  up | down) ;;
  -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die 2 "unknown action '$action' (allowed: up, down); $usage" ;;
esac
BURST=
while [ $# -ge 1 ]; do
  case "$1" in
    --rate)
      [ $# -ge 2 ] || die 2 "--rate needs a value such as 1gbit"
      RATE=$2
      shift 2
      ;;
    --burst)
      [ $# -ge 2 ] || die 2 "--burst needs a number of bytes such as 32768"
      BURST=$2
      shift 2
      ;;
    *) break ;;
  esac
done
case "$RATE" in
  *[!0-9]*[!0-9]*bit | *[!0-9kmg]bit | bit | [!0-9]*) die 2 "--rate '$RATE' is not a rate such as 100mbit, 1gbit or 10gbit" ;;
  *bit) ;;
  *) die 2 "--rate '$RATE' is not a rate such as 100mbit, 1gbit or 10gbit" ;;
esac
digits=${RATE%bit}
digits=${digits%[kmg]}
digits=${digits#"${digits%%[!0]*}"} # no leading zeros: shell arithmetic would read octal
[ -n "$digits" ] || die 2 "--rate '$RATE': must be above 0"
[ ${#digits} -le 6 ] || die 2 "--rate '$RATE': at most 6 digits before the unit"
case "${RATE%bit}" in
  *k) scale=1000 ;;
  *m) scale=1000000 ;;
  *g) scale=1000000000 ;;
  *) scale=1 ;;
esac
# The bucket's depth in bytes, unless --burst says: 250 us of RATE, at least 16 KiB. A deeper
# bucket lets a message through faster than the link: with 256 KiB at 1gbit, after an idle moment
# a 256 KiB message arrived in 0.34 ms where the wire takes 2.2 (with 32 KiB, 2.16 ms); a
# shallower one lowers the link's goodput (16 KiB: 100 MB/s both ways at once, 8 KiB: 88, against
# 104-110 at 32 KiB). docs/over-tcp.md, "The emulated link's bucket", has what either costs.
burst=$((digits * scale / 32000))
[ "$burst" -ge 16384 ] || burst=16384
if [ -n "$BURST" ]; then
  case "$BURST" in
    *[!0-9]* | 0*) die 2 "--burst '$BURST': a whole number of bytes, 2048 to 1073741824" ;;
  esac
  { [ ${#BURST} -le 10 ] && [ "$BURST" -ge 2048 ] && [ "$BURST" -le 1073741824 ]; } ||
    die 2 "--burst '$BURST': a whole number of bytes, 2048 to 1073741824"
  burst=$BURST
fi
[ $# -ge 1 ] || die 2 "no node named; $usage"
[ $# -le 200 ] || die 2 "$# nodes: at most 200 (one /24 subnet)"
seen=" "
for node in "$@"; do
  case "$node" in
    *[!A-Za-z0-9_-]* | -*) die 2 "node name '$node': letters, digits, '-' and '_' only" ;;
  esac
  [ ${#node} -le 12 ] || die 2 "node name '$node': at most 12 characters (it names a veth)"
  case "$seen" in
    *" $node "*) die 2 "node '$node' named twice" ;;
  esac
  seen="$seen$node "
done
[ "$(id -u)" = 0 ] || die 3 "network namespaces need root"
command -v ip > /dev/null || die 3 "no 'ip' on PATH (Debian: iproute2)"
command -v tc > /dev/null || die 3 "no 'tc' on PATH (Debian: iproute2)"

remove() {
  for node in "$@"; do
    ip netns del "$node" 2> /dev/null
    ip link del "v-$node" 2> /dev/null
  done
  # The bridge goes with its last node.
  if ip link show "$BRIDGE" > /dev/null 2>&1 && [ -z "$(ip link show master "$BRIDGE")" ]; then
    ip link del "$BRIDGE"
  fi
  return 0
}

if [ "$action" = down ]; then
  remove "$@"
  exit 0
fi

remove "$@"
fail() {
  remove "$@"
  die 3 "$failed"
}
# Interrupted half-way: what was made goes.
trap 'remove "$@"; exit 130' INT
trap 'remove "$@"; exit 143' TERM
if ! ip link show "$BRIDGE" > /dev/null 2>&1; then
  failed="could not make the bridge $BRIDGE"
  { ip link add "$BRIDGE" type bridge && ip addr add "$SUBNET.1/24" dev "$BRIDGE" &&
    ip link set "$BRIDGE" up; } || fail "$@"
fi
host=2
for node in "$@"; do
  failed="could not make node $node's namespace and link"
  { ip netns add "$node" &&
    ip link add "v-$node" type veth peer name eth0 netns "$node" &&
    ip link set "v-$node" master "$BRIDGE" up &&
    ip netns exec "$node" ip addr add "$SUBNET.$host/24" dev eth0 &&
    ip netns exec "$node" ip link set eth0 up &&
    ip netns exec "$node" ip link set lo up; } || fail "$@"
  # The node's egress at RATE: its NIC.
  failed="tc could not shape node $node's link to $RATE (does the kernel have tbf?)"
  ip netns exec "$node" tc qdisc replace dev eth0 root tbf rate "$RATE" burst "$burst" latency 50ms ||
    fail "$@"
  echo "$node $SUBNET.$host"
  host=$((host + 1))
done
trap - INT TERM
echo "shaping: rate $RATE, burst $burst bytes"
echo "mpirun options: --mca btl tcp,self --mca oob_tcp_if_include $SUBNET.0/24" \
  "--mca btl_tcp_if_include $SUBNET.0/24 (with PPBENCH_AGENT_NETNS=1 and the local agent)"
