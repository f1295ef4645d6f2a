"""The emulated nodes that the link benchmarks (allreduce_link.py, pipeline_link.py) run on:
R network namespaces behind one bridge, each node's egress shaped to a rate
(scripts/emulated-nodes.sh), what the link between two of them carries, and `mpirun` with one
process on each named node. scripts/emulated_nodes.py keeps the launch recipe itself."""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from emulated_nodes import mpirun_options, write_hostfile  # noqa: E402
from mpi_bench import MPI_ENV, Failure  # noqa: E402
from script_cli import OneLineParser, last_line  # noqa: E402

NODES = ROOT / "scripts" / "emulated-nodes.sh"
PROBE = Path(__file__).resolve().parent / "link_probe.py"
PROBE_MIB, PING_ROUNDS, MESSAGE_ROUNDS = 64, 200, 50
BURST_RANGE = (2048, 1 << 30)  # scripts/emulated-nodes.sh's --burst
RUN_TIMEOUT = 300
# The nodes have fixed names and addresses: two runs at once on one machine would take each
# other's down, so a run holds this lock while its nodes exist (a second one waits).
NODES_LOCK = Path(tempfile.gettempdir()) / "ppbench-emulated-nodes.lock"


def link_parser(prog: str, description: str, folder: str) -> argparse.ArgumentParser:
    """The options every link benchmark takes: --ppbench, --out (default
    results/perf/<folder>/<commit>.json) and --rate; bad options are one line (OneLineParser)."""
    ap = OneLineParser(prog=prog, description=description)
    ap.add_argument("--ppbench", default=str(ROOT / "build" / "ppbench"))
    ap.add_argument("--out", type=Path,
                    help=f"the JSON record (default: results/perf/{folder}/<commit>.json)")
    ap.add_argument("--rate", default="1gbit",
                    help="each node's link, as tc writes it (e.g. 100mbit, 1gbit; default 1gbit)")
    ap.add_argument("--burst", type=burst_bytes,
                    help="bytes the link's shaper lets through at once after an idle moment "
                         f"({BURST_RANGE[0]} to {BURST_RANGE[1]}; default 250 us of --rate, at "
                         "least 16384: scripts/emulated-nodes.sh)")
    return ap


def burst_bytes(text: str) -> int:
    """argparse type of --burst."""
    low, high = BURST_RANGE
    if not text.isdigit() or not low <= int(text) <= high:
        raise argparse.ArgumentTypeError(f"'{text}': a whole number of bytes, {low} to {high}")
    return int(text)


def node_names(count: int) -> list[str]:
    return [f"ppb-node-{k}" for k in range(count)]


@dataclass
class Nodes:
    """What scripts/emulated-nodes.sh up made: each node's address, their network and how each
    node's egress is shaped."""
    addresses: dict[str, str]
    network: str  # the subnet the mpirun options name
    burst_bytes: int = 0  # the shaper's bucket (0 for `down`)


def nodes(action: str, names: list[str], rate: str | None = None,
          burst: int | None = None) -> Nodes:
    """scripts/emulated-nodes.sh up|down, and for up what it printed."""
    cmd = [str(NODES), action, *(["--rate", rate] if rate else []),
           *(["--burst", str(burst)] if burst else []), *names]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise Failure(r.stderr.strip() or f"'{' '.join(cmd)}' exited {r.returncode}",
                      r.returncode if r.returncode in (2, 3) else 1)
    pairs = (line.split() for line in r.stdout.splitlines())
    network = re.search(r"oob_tcp_if_include (\S+)", r.stdout)
    shaping = re.search(r"^shaping: rate \S+, burst (\d+) bytes$", r.stdout, re.MULTILINE)
    if action == "up" and (network is None or shaping is None):
        raise Failure(f"'{' '.join(cmd)}' named no network for mpirun or no shaping: "
                      f"{last_line(r.stdout)}")
    return Nodes({p[0]: p[1] for p in pairs if len(p) == 2 and p[0] in names},
                 network.group(1) if network else "", int(shaping.group(1)) if shaping else 0)


@contextlib.contextmanager
def emulated(names: list[str], rate: str, burst: int | None = None) -> Iterator[Nodes]:
    """The nodes `names`, each link `rate` with a bucket of `burst` bytes (None: the script's
    default), for the time of the block: made under the lock and removed at its end, also after
    a failure."""
    try:
        lock = open(NODES_LOCK, "w")
    except OSError as e:
        raise Failure(f"cannot open the emulated nodes' lock {NODES_LOCK}: {e.strerror}", 3)
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield nodes("up", names, rate, burst)
        finally:
            try:
                nodes("down", names)
            except Failure:
                pass  # what made `up` or a run fail is the message to give


def in_node(node: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", node, *cmd]


def measure_link(made: Nodes, names: list[str], message_bytes: int | None = None) -> dict:
    """Goodput both ways at once between the first two nodes, half the shortest TCP round trip,
    the shaper's bucket, and, given `message_bytes`, one message of that size after an idle
    moment: when it was all there (half the 1-byte round trip taken off its own round trip) and
    how long its sender's sendall took."""
    a, b = names[0], names[1]
    addresses = made.addresses
    probes: list[subprocess.Popen] = []

    def ping(size: int, rounds: int) -> dict:
        echo = subprocess.Popen(in_node(b, sys.executable, str(PROBE), "echo", addresses[b],
                                        str(size)),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        probes.append(echo)
        r = subprocess.run(in_node(a, sys.executable, str(PROBE), "ping", addresses[b],
                                   str(rounds), str(size)), capture_output=True, text=True,
                           timeout=RUN_TIMEOUT)
        if r.returncode != 0:
            raise Failure(f"the ping probe failed: {last_line(r.stderr)}")
        echo.wait(timeout=60)
        return json.loads(r.stdout)

    try:
        for me, peer in ((a, b), (b, a)):
            probes.append(subprocess.Popen(
                in_node(me, sys.executable, str(PROBE), "duplex", addresses[me], addresses[peer],
                        str(PROBE_MIB)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True))
        rates = []
        for p in probes:
            out, err = p.communicate(timeout=RUN_TIMEOUT)
            if p.returncode != 0:
                raise Failure(f"the link probe failed: {last_line(err)}")
            rates.append(json.loads(out)["rx"])
        small = ping(1, PING_ROUNDS)
        large = ping(message_bytes, MESSAGE_ROUNDS) if message_bytes else None
    finally:
        for p in probes:  # none outlives the measurement, whatever ended it
            if p.poll() is None:
                p.kill()
                p.wait()
    link = {"goodput_bytes_per_s": min(rates), "rates_bytes_per_s": rates,
            "latency_s": small["rtt_min"] / 2, "rtt_median_s": small["rtt_median"],
            "burst_bytes": made.burst_bytes}
    if large:
        link["message"] = {"bytes": message_bytes,
                           "arrived_s": large["rtt_median"] - small["rtt_min"] / 2,
                           "send_call_s": large["send_call_median"],
                           "at_goodput_s": link["latency_s"] + message_bytes / min(rates)}
    return link


def on_nodes(mpirun: str, names: list[str], network: str, tmp: Path, *program: str,
             mca: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`mpirun -np len(names)`, one process on each named node (its network namespace), over
    the nodes' `network` only; Failure if it exits non-zero."""
    hosts = write_hostfile(str(tmp / "hosts"), {n: 1 for n in names})
    cmd = [mpirun, "-np", str(len(names)), *mpirun_options(hosts, network), *mca, *program]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                       env=dict(os.environ, PPBENCH_AGENT_NETNS="1", PPBENCH_AGENT_HOSTNAMES="1",
                                TMPDIR=str(tmp), **MPI_ENV))  # the nodes' own /tmp go with tmp
    if r.returncode != 0:
        raise Failure(f"'{' '.join(cmd)}' exited {r.returncode}: {last_line(r.stderr)}")
    return r


def simulate(ppbench: str, *args: str) -> dict:
    """`ppbench simulate ARGS --format json`'s record; Failure if it exits non-zero."""
    cmd = [ppbench, "simulate", *args, "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if r.returncode != 0:
        raise Failure(f"'{' '.join(cmd)}' exited {r.returncode}: {last_line(r.stderr)}")
    return json.loads(r.stdout)


def require_settings(record: dict, mca: list[str] | tuple[str, ...], what: str) -> None:
    """Failure unless a ppbench record's processes ran with every `--mca NAME VALUE` in `mca`
    (its launch.mpi.settings)."""
    applied = record["launch"]["mpi"]["settings"]
    given = dict(zip(mca[1::3], mca[2::3]))
    if any(applied.get(name) != value for name, value in given.items()):
        raise Failure(f"{what}: the processes ran with {applied}, not with {given}")
