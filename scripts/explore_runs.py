#!/usr/bin/env python3
"""Random training steps against the single-device step and the memory model: correctness where
no test was written (docs/testing.md, "Exploring runs").

Each case draws a schedule family with D, N and chunks, a small workload (an MLP, a tiny Llama or
GPT, a small AmoebaNet) and its shape, the micro-batch size, optimizer, --recompute, channel
capacity, partition and step count, and runs `ppbench run --dtype f64 --check --format json`.
With --edit it first edits the generated order (adjacent swaps, moves, a B split into I and W)
and runs the edit as a schedule file: a sound order must compute the same step as any other.
With --mpirun every pipeline rank is a process, and two data-parallel replicas may join; both
together run edited orders across processes. --nodes (with --mpirun) spreads the processes over
two nodes emulated here (scripts/mpi-local-agent.sh), by slot or round-robin, the second node
under its own hostname with its clock 1000 s ahead where Linux namespaces are allowed. What must
hold:

  - exit 0: the check passed, and on every rank the measured parameters, gradients, optimizer
    states and activations equal `ppbench memory`'s model, the bytes in flight at most its bound;
  - across processes, also: the job's step under a minute, and every hand-over in the trace no
    shorter than minus its two processes' clock uncertainties (it starts on the sender's clock
    and ends on the receiver's, both shifted onto process 0's);
  - exit 2: nothing on stdout and one line "ppbench: error: ..." (a configuration ppbench
    refuses, such as 1F1B with N < D, or an edit that breaks a dependency);
  - anything else (exit 1 or 3, a signal, a case past --timeout) is a finding.

  scripts/explore_runs.py PPBENCH [--cases N] [--seed S] [--timeout SECONDS] [--edit]
                          [--mpirun [--nodes]]

Prints each finding with its command line and a summary; exits 1 if there was one, 2 for bad
arguments.
"""
from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
from types import SimpleNamespace

from emulated_nodes import mpirun_options, namespaces_allowed, write_hostfile
from fuzz_cli import case_parser, program_of
from script_cli import run

FAMILIES = ["naive", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "interleaved-zb",
            "chimera", "chimera-doubling", "zb-h1", "zb-h2", "zb-v", "zb-1p", "zb-2p", "v-half",
            "v-min", "dualpipe", "dualpipev"]
CHUNKED = {"interleaved-1f1b", "looped-bfs", "interleaved-zb"}
MEASURED_AS_MODELLED = ("params", "grads", "optimizer", "activations")
MPIRUN = ["mpirun", "--oversubscribe"]
MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# Two emulated nodes (docs/multi-process.md, "Two nodes on one machine").
NODES = ("explore-node-a", "explore-node-b")
AHEAD_S = 1000


def workload(rng: random.Random) -> list[str]:
    """Flags of a small workload: every step takes milliseconds, every stage at least a layer."""
    kind = rng.choice(["mlp", "llama", "gpt", "amoebanet"])
    if kind == "mlp":
        return ["-w", "mlp", "--layers", str(rng.randint(2, 30)), "--width",
                str(rng.choice([4, 8, 16])), "--classes", str(rng.randint(2, 5))]
    if kind == "amoebanet":
        return ["-w", "amoebanet", "--layers", str(rng.choice([3, 6])), "--filters",
                str(rng.choice([8, 16])), "--image-size", str(rng.choice([32, 64])), "--classes",
                str(rng.randint(1, 4))]
    preset = "tiny-llama" if kind == "llama" else "tiny-gpipe"
    flags = ["-w", "transformer", "--preset", preset, "--layers", str(rng.randint(1, 12)),
             "--seq", str(rng.randint(1, 9))]
    if kind == "llama":
        flags += ["--hidden", "16", "--heads", "2", "--kv-heads", str(rng.choice([1, 2])),
                  "--ffn", "24", "--vocab", "32"]
    return flags


def order_flags(rng: random.Random, family: str) -> list[str]:
    """Flags that shape the family's order: chunks, the searched families' memory limit."""
    flags: list[str] = []
    if family in CHUNKED and rng.random() < 0.7:
        flags += ["-v", str(rng.randint(1, 3))]
    if family in ("zb-1p", "zb-2p") and rng.random() < 0.5:
        flags += ["--memory-limit", str(rng.choice([1, 1.5, 2, 3, 6]))]
    return flags


def run_flags(rng: random.Random, processes: bool) -> list[str]:
    """The run's own options, each drawn or left at its default."""
    flags: list[str] = []
    if rng.random() < 0.5:
        flags += ["-b", str(rng.randint(1, 3))]
    if rng.random() < 0.5:
        flags += ["--optimizer", rng.choice(["none", "sgd", "adamw"])]
    if rng.random() < 0.3:
        flags.append("--recompute")
    if rng.random() < 0.4:
        flags += ["--channel-capacity", str(rng.randint(1, 4))]
    if rng.random() < 0.3:
        flags += ["--partition", "uniform"]
    if rng.random() < 0.3:
        flags += ["--steps", str(rng.randint(1, 3))]
    if not processes and rng.random() < 0.2:
        flags += ["--pin-ranks", "off"]
    return flags


def edit_order(rng: random.Random, text: str) -> str:
    """`ppbench show`'s text form with 1 to 6 edits on random ranks: an adjacent swap, a move, or
    a B split into its I and W. Most edits break a dependency (exit 2); the rest must still run."""
    lines = text.splitlines()
    header = [line for line in lines if line.startswith("#")]
    ranks = [line.split(":", 1)[1].split() for line in lines if line.startswith("rank")]
    for _ in range(rng.randint(1, 6)):
        order = rng.choice(ranks)
        if len(order) < 2:
            continue
        kind = rng.random()
        if kind < 0.6:
            j = rng.randrange(len(order) - 1)
            order[j], order[j + 1] = order[j + 1], order[j]
        elif kind < 0.8:
            order.insert(rng.randrange(len(order)), order.pop(rng.randrange(len(order))))
        else:
            whole = [j for j, a in enumerate(order) if re.fullmatch(r"B\d+\.\d+", a)]
            if whole:
                j = rng.choice(whole)
                order[j:j + 1] = ["I" + order[j][1:], "W" + order[j][1:]]
    return "\n".join(header + [f"rank {r}: " + " ".join(a) for r, a in enumerate(ranks)]) + "\n"


def draw_case(rng: random.Random, edit: bool, mpirun: bool, nodes: bool = False) \
        -> SimpleNamespace:
    """One case: the ppbench argv (after the program), the launcher's processes (0: none), with
    `nodes` how they are mapped onto the two nodes, and with `edit` the `show` argv of the order
    to edit first (the run then reads the file)."""
    family = rng.choice(FAMILIES)
    map_by = rng.choice(["slot", "node"]) if mpirun and nodes else None
    check = ["--dtype", "f64", "--check", "--format", "json", "--watchdog", "30"]
    if mpirun:
        pp = rng.choice([1, 2, 2, 3, 4])
        dp = rng.choice([1, 1, 2]) if pp <= 2 else 1
        dp = 2 if pp * dp == 1 else dp
        order = ["-s", family, "-n", str(rng.randint(1, 10)), *order_flags(rng, family)]
        launch = ["--pp", str(pp), "--dp", str(dp)]
        if dp > 1 and rng.random() < 0.3:
            launch.append("--dp-overlap")
        rest = [*launch, *workload(rng), *run_flags(rng, True), *check]
        processes = pp * dp
        order_devices = ["-d", str(pp)]
    else:
        order = ["-s", family, "-d", str(rng.randint(1, 6)), "-n", str(rng.randint(1, 14)),
                 *order_flags(rng, family)]
        rest = [*workload(rng), *run_flags(rng, False), *check]
        processes = 0
        order_devices = []
    if edit:
        return SimpleNamespace(argv=["run", *rest], processes=processes, map_by=map_by,
                               show=["show", *order, *order_devices],
                               edit_seed=rng.randrange(2**32))
    return SimpleNamespace(argv=["run", *order, *rest], processes=processes, map_by=map_by,
                           show=None)


def judge_timeline(record: dict, trace: dict | None) -> str | None:
    """Across processes: the job's step on one clock, and no hand-over shorter than its two
    processes' clock offsets can make it."""
    job = record.get("data_parallel")
    if job is None:
        return None
    if job["makespan_s"] >= 60:
        return f"the job's step lasted {job['makespan_s']:g} s: are the clocks on one timeline?"
    if trace is None:
        return "no trace was written"
    err = [p["clock_offset_uncertainty_s"] + 1e-6 for p in job["per_process"]]
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "X" and e.get("cat") == "comm":
            src, dst = e["args"]["src"], e["args"]["dst"]
            if e["dur"] * 1e-6 < -(err[src] + err[dst]):
                return (f"hand-over {e['name']} lasted {e['dur']:g} us, beyond its clocks' "
                        f"uncertainty ({(err[src] + err[dst]) * 1e6:g} us)")
    return None


def judge(code: int, stdout: str, stderr: str, mpirun: bool = False,
          trace: dict | None = None) -> str | None:
    """What the case broke, or None where it kept every promise above. Under mpirun only
    ppbench's own lines count: mpirun adds a banner of its own to a job that exits non-zero."""
    if code == 2:
        lines = stderr.strip().splitlines()
        if mpirun:
            lines = [line for line in lines if line.startswith("ppbench")]
        if stdout or len(lines) != 1 or not lines[0].startswith("ppbench: error:"):
            return "exit 2 without exactly one 'ppbench: error:' line and an empty stdout"
        return None
    if code != 0:
        return f"exit code {code}"
    try:
        record = json.loads(stdout)
    except json.JSONDecodeError:
        return "exit 0 without a JSON record on stdout"
    if not record.get("check", {}).get("passed"):
        return "the check failed: " + json.dumps(record.get("check"))[:300]
    for rank in record.get("memory", {}).get("ranks", []):
        got, want = rank["measured"], rank["model"]
        for key in MEASURED_AS_MODELLED:
            if got[key] != want[key]:
                return f"rank {rank['rank']} measured {key} {got[key]:g}, modelled {want[key]:g}"
        if got["comm"] > want["comm"]:
            return (f"rank {rank['rank']} had {got['comm']:g} bytes in flight, "
                    f"bound {want['comm']:g}")
    return judge_timeline(record, trace) if mpirun else None


def run_case(ppbench: str, case: SimpleNamespace, timeout: float, tmp: str,
             skew: bool = False):
    """(command line, exit code, stdout, stderr, trace or None) of one case; None where the
    schedule to edit was refused (nothing to explore there); exit code None past `timeout`.
    `skew`: the second emulated node under its own hostname, its clock ahead."""
    argv = list(case.argv)
    if case.show is not None:
        shown = subprocess.run([ppbench, *case.show], capture_output=True, text=True,
                               timeout=timeout)
        if shown.returncode != 0:
            return None
        path = os.path.join(tmp, "edited.txt")
        with open(path, "w") as f:
            f.write(edit_order(random.Random(case.edit_seed), shown.stdout))
        argv = ["run", "--schedule-file", path, *argv[1:]]
    trace_path = os.path.join(tmp, "trace.json")
    if os.path.exists(trace_path):
        os.remove(trace_path)
    command = [ppbench, *argv]
    env = None
    if case.processes:
        command = [*MPIRUN, "-np", str(case.processes), *command, "--trace-out", trace_path]
        env = {**os.environ, **MPIRUN_ENV}
    if case.processes and case.map_by:
        hosts = write_hostfile(os.path.join(tmp, "hosts"), {n: 2 for n in NODES})
        command[len(MPIRUN):len(MPIRUN)] = ["--map-by", case.map_by, *mpirun_options(hosts)]
        env.update(TMPDIR=tmp)  # the agent makes the nodes' temporary directories there
        if skew:
            env.update(PPBENCH_AGENT_HOSTNAMES="1", PPBENCH_AGENT_CLOCKS=f"{NODES[1]}={AHEAD_S}")
    try:
        r = subprocess.run(command, capture_output=True, text=True, errors="replace",
                           timeout=timeout, cwd=tmp, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return command, None, "", "", None
    trace = None
    if r.returncode == 0 and os.path.exists(trace_path):
        with open(trace_path) as f:
            trace = json.load(f)
    return command, r.returncode, r.stdout, r.stderr, trace


def main(argv: list[str] | None = None) -> int:
    ap = case_parser("explore_runs", __doc__.splitlines()[0], cases=200, timeout=120)
    ap.add_argument("--edit", action="store_true", help="run edited orders as schedule files")
    ap.add_argument("--mpirun", action="store_true", help="one process per rank, with replicas")
    ap.add_argument("--nodes", action="store_true",
                    help="with --mpirun: over two nodes emulated here, one's clock ahead")
    a = ap.parse_args(argv)
    if a.nodes and not a.mpirun:
        ap.error("--nodes spreads the processes of --mpirun: give --mpirun too")
    ppbench = program_of(a)
    skew = a.nodes and namespaces_allowed()
    if a.nodes and not skew:
        print("explore_runs: unshare --uts --time is not allowed here: the emulated nodes share "
              "one hostname and clock", file=sys.stderr)
    rng = random.Random(a.seed)
    kind = "+".join(k for k, on in (("edit", a.edit), ("mpirun", a.mpirun), ("nodes", a.nodes))
                    if on) or "plain"
    codes: dict[str, int] = {}
    findings = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.cases):
            ran = run_case(ppbench, draw_case(rng, a.edit, a.mpirun, a.nodes), a.timeout, tmp,
                           skew)
            if ran is None:
                codes["not drawn"] = codes.get("not drawn", 0) + 1
                continue
            command, code, out, err, trace = ran
            codes[str(code)] = codes.get(str(code), 0) + 1
            why = (f"past {a.timeout:g} s" if code is None
                   else judge(code, out, err, a.mpirun, trace))
            if why:
                findings += 1
                print(f"FINDING ({why}): {shlex.join(command)}\n  {err.strip()[-400:]}",
                      flush=True)
            if (k + 1) % 25 == 0:
                print(f"explore_runs: {k + 1}/{a.cases} cases, {findings} findings",
                      file=sys.stderr, flush=True)
    print(f"explore_runs: {a.cases} cases ({kind}), seed {a.seed}: exit codes "
          f"{dict(sorted(codes.items()))}, {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(run("explore_runs", main))
