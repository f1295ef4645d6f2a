"""How a job is launched over nodes emulated on this machine (docs/multi-process.md, "Two nodes
on one machine"): the hostfile, and the mpirun options that start each node's daemon through
scripts/mpi-local-agent.sh and keep the nodes apart. One home for the recipe that the multi-node
tests, scripts/explore_runs.py and the link benchmarks (benchmarks/link_nodes.py) launch with.
Standard library only."""
from __future__ import annotations

import os
import subprocess

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi-local-agent.sh")


def write_hostfile(path: str, slots: dict[str, int]) -> str:
    """A hostfile of `slots` (node name -> processes it takes) at `path`; returns `path`."""
    with open(path, "w") as f:
        f.write("".join(f"{node} slots={n}\n" for node, n in slots.items()))
    return path


def mpirun_options(hostfile: str, network: str = "lo") -> list[str]:
    """mpirun's options for the nodes of `hostfile`: their daemons started here by the agent,
    no shared memory between them (Open MPI would find they share a machine), and all traffic on
    `network` (an interface, or a subnet such as emulated-nodes.sh's)."""
    return ["--hostfile", hostfile, "--mca", "plm_rsh_agent", AGENT,
            "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "btl", "tcp,self",
            "--mca", "rtc_hwloc_vmhole", "none",
            "--mca", "oob_tcp_if_include", network, "--mca", "btl_tcp_if_include", network]


def namespaces_allowed() -> bool:
    """Whether the agent may give a node its own hostname and clock (unshare, as root)."""
    try:
        return subprocess.run([AGENT, "--namespaces-allowed"], timeout=30).returncode == 0
    except OSError:
        return False
