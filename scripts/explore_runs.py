#!/usr/bin/env python3
"""Random training steps against the single-device step and the memory model: correctness where
no test was written (docs/testing.md, "Exploring runs").

Each case draws a schedule family with D, N and chunks, a small workload (an MLP, a tiny Llama or
GPT, a small AmoebaNet) and its shape, the micro-batch size, the seed, the optimizer with its
learning rate and weight decay, --recompute, channel capacity, the partition (uniform, or layer
counts per stage: now and then counts that do not fit, which must be refused) and step count, and
runs `ppbench run --dtype f64|f32 --check --format json` (the check at the program's tolerance
for the dtype). Half the threaded cases also write --results and --profile-out. With --edit it
first edits the generated order (adjacent swaps, moves, a B split into I and W) and runs the edit
as a schedule file: a sound order must compute the same step as any other. With --mpirun every
pipeline rank is a process, and two data-parallel replicas may join; both together run edited
orders across processes. --nodes (with --mpirun) spreads the processes over two nodes emulated
here (scripts/mpi-local-agent.sh), by slot or round-robin, the second node under its own
hostname with its clock 1000 s ahead where Linux namespaces are allowed. A threaded run's
address space is capped (--memory-cap GiB). What must hold:

  - exit 0: the check passed, and on every rank the measured parameters, gradients, optimizer
    states and activations equal `ppbench memory`'s model, the bytes in flight at most its bound;
  - exit 0, also: --results holds the record of stdout, one line; --profile-out the run's
    stages (its layer counts); `ppbench simulate` of the same point (family or file, D, N,
    workload, partition, dtype, with the run's --profile-out as its costs where there is one)
    runs, and names the same schedule: family, D, N, actions, chunks, stages and layer counts,
    and the same activation peak per rank as the run's memory model (not with --recompute,
    which simulate does not model, for zb-1p and zb-2p, which it plans again for its own costs,
    or with replicas);
  - across processes, also: the job's step under a minute, and every hand-over in the trace no
    shorter than minus its two processes' clock uncertainties (it starts on the sender's clock
    and ends on the receiver's, both shifted onto process 0's);
  - exit 2: nothing on stdout and one line "ppbench: error: ..." (a configuration ppbench
    refuses, such as 1F1B with N < D, or an edit that breaks a dependency);
  - anything else (exit 1 or 3, a signal, a case past --timeout) is a finding.

  scripts/explore_runs.py PPBENCH [--cases N] [--seed S] [--timeout SECONDS]
                          [--memory-cap GIB] [--edit] [--mpirun [--nodes]]

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
from fuzz_cli import address_space, case_parser, program_of
from script_cli import run

FAMILIES = ["naive", "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "interleaved-zb",
            "chimera", "chimera-doubling", "zb-h1", "zb-h2", "zb-v", "zb-1p", "zb-2p", "v-half",
            "v-min", "dualpipe", "dualpipev"]
CHUNKED = {"interleaved-1f1b", "looped-bfs", "interleaved-zb"}
V_SHAPED = {"zb-v", "v-half", "v-min", "dualpipev"}
PLANNED = {"zb-1p", "zb-2p"}  # ordered for the costs they are given
MEASURED_AS_MODELLED = ("params", "grads", "optimizer", "activations")
MPIRUN = ["mpirun", "--oversubscribe"]
MPIRUN_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# Two emulated nodes (docs/multi-process.md, "Two nodes on one machine").
NODES = ("explore-node-a", "explore-node-b")
AHEAD_S = 1000


def workload(rng: random.Random) -> tuple[list[str], int]:
    """Flags of a small workload, and its layers as --partition counts them (an MLP's
    --layers; a transformer's decoder layers and its embedding and head; AmoebaNet's normal
    cells and its stem, reductions and classifier): every step takes milliseconds."""
    kind = rng.choice(["mlp", "llama", "gpt", "amoebanet"])
    if kind == "mlp":
        layers = rng.randint(2, 30)
        return ["-w", "mlp", "--layers", str(layers), "--width", str(rng.choice([4, 8, 16, 32])),
                "--classes", str(rng.randint(2, 5))], layers
    if kind == "amoebanet":
        layers = rng.choice([3, 6])
        return ["-w", "amoebanet", "--layers", str(layers), "--filters", str(rng.choice([8, 16])),
                "--image-size", str(rng.choice([32, 64])), "--classes",
                str(rng.randint(1, 4))], layers + 6
    preset = "tiny-llama" if kind == "llama" else "tiny-gpipe"
    layers = rng.randint(1, 12)
    flags = ["-w", "transformer", "--preset", preset, "--layers", str(layers),
             "--seq", str(rng.randint(1, 9))]
    if kind == "llama":
        flags += ["--hidden", "16", "--heads", "2", "--kv-heads", str(rng.choice([1, 2])),
                  "--ffn", "24", "--vocab", str(rng.choice([32, 50, 256]))]
    return flags, layers + 2


def stages_per_chain(family: str, devices: int, chunks: int) -> int:
    """How many stages --partition shares the layers out to (docs/schedules.md's layouts)."""
    if family in CHUNKED:
        return devices * chunks
    if family in V_SHAPED:
        return 2 * devices
    return devices


def partition_flags(rng: random.Random, stages: int, layers: int) -> list[str]:
    """--partition drawn or left at its default: uniform, or layer counts per stage (now and
    then a list that does not fit, which must be refused)."""
    draw = rng.random()
    if draw < 0.2:
        return ["--partition", "uniform"]
    if draw < 0.45 and layers >= stages:
        cuts = sorted(rng.sample(range(1, layers), stages - 1))
        counts = [b - a for a, b in zip([0] + cuts, cuts + [layers])]
        if rng.random() < 0.1:
            counts[rng.randrange(stages)] += rng.choice([-1, 1])
        return ["--partition", ",".join(map(str, counts))]
    return []


def order_flags(rng: random.Random, family: str) -> list[str]:
    """Flags that shape the family's order: chunks, the searched families' memory limit."""
    flags: list[str] = []
    if family in CHUNKED and rng.random() < 0.7:
        flags += ["-v", str(rng.randint(1, 3))]
    if family in ("zb-1p", "zb-2p") and rng.random() < 0.5:
        flags += ["--memory-limit", str(rng.choice([1, 1.5, 2, 3, 6]))]
    return flags


def run_flags(rng: random.Random, processes: bool) -> list[str]:
    """The run's own options, each drawn or left at its default: the seed, the optimizer and its
    learning rate and weight decay, --recompute, the channel capacity, the steps."""
    flags: list[str] = []
    if rng.random() < 0.5:
        flags += ["-b", str(rng.randint(1, 3))]
    if rng.random() < 0.5:
        flags += ["--seed", str(rng.choice([0, 1, 7, 2**32 + 5, 2**64 - 1,
                                            rng.randrange(2**64)]))]
    optimizer = rng.choice(["none", "sgd", "adamw", None])
    if optimizer:
        flags += ["--optimizer", optimizer]
    if optimizer != "none" and rng.random() < 0.4:
        flags += ["--lr", rng.choice(["1e-4", "0.01", "0.1", "1"])]
    if optimizer in ("adamw", None) and rng.random() < 0.3:
        flags += ["--weight-decay", rng.choice(["0", "0.1", "1"])]
    if rng.random() < 0.3:
        flags.append("--recompute")
    if rng.random() < 0.4:
        flags += ["--channel-capacity", str(rng.randint(1, 4))]
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
    to edit first (the run then reads the file). Threaded cases also write --results and
    --profile-out (`outputs`)."""
    family = rng.choice(FAMILIES)
    map_by = rng.choice(["slot", "node"]) if mpirun and nodes else None
    dtype = rng.choice(["f64", "f32"])
    check = ["--dtype", dtype, "--check", "--format", "json", "--watchdog", "30"]
    flags, layers = workload(rng)
    if mpirun:
        devices = rng.choice([1, 2, 2, 3, 4])
        dp = rng.choice([1, 1, 2]) if devices <= 2 else 1
        dp = 2 if devices * dp == 1 else dp
        order = ["-s", family, "-n", str(rng.randint(1, 10)), *order_flags(rng, family)]
        launch = ["--pp", str(devices), "--dp", str(dp)]
        if dp > 1 and rng.random() < 0.3:
            launch.append("--dp-overlap")
        processes = devices * dp
        order_devices = ["-d", str(devices)]
    else:
        devices = rng.randint(1, 6)
        order = ["-s", family, "-d", str(devices), "-n", str(rng.randint(1, 14)),
                 *order_flags(rng, family)]
        launch = []
        processes = 0
        order_devices = []
    chunks = int(order[order.index("-v") + 1]) if "-v" in order else 2
    partition = partition_flags(rng, stages_per_chain(family, devices, chunks), layers)
    rest = [*launch, *flags, *run_flags(rng, bool(mpirun)), *partition, *check]
    outputs = not mpirun and rng.random() < 0.5
    if edit:
        return SimpleNamespace(argv=["run", *rest], processes=processes, map_by=map_by,
                               show=["show", *order, *order_devices],
                               edit_seed=rng.randrange(2**32), outputs=outputs)
    return SimpleNamespace(argv=["run", *order, *rest], processes=processes, map_by=map_by,
                           show=None, outputs=outputs)


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


# The run's options that simulate takes as they are (the point, the workload, its partition).
SIMULATE_TAKES = {"-s", "-d", "-n", "-v", "--memory-limit", "--pp", "--dp", "-w", "--layers",
                  "--width", "--classes", "--filters", "--image-size", "--preset", "--seq",
                  "--hidden", "--heads", "--kv-heads", "--ffn", "--vocab", "-b", "--dtype",
                  "--partition", "--schedule-file"}
SAME_IN_SIMULATE = ("schedule", "devices", "microbatches", "actions", "chunks", "stages")


def simulate_argv(run_argv: list[str], profile: str | None = None) -> list[str]:
    """`ppbench simulate` of the run's point: its schedule (or file), D, N, workload and
    partition, with the costs of the run's --profile-out where there is one."""
    argv = ["simulate"]
    for i, a in enumerate(run_argv):
        if a in SIMULATE_TAKES and i + 1 < len(run_argv):
            argv += [a, run_argv[i + 1]]
        elif a == "--dp-overlap":
            argv.append(a)
    if profile:
        argv += ["--device-profile", profile]
    return argv + ["--format", "json"]


def judge_outputs(record: dict, results: str, profile: dict) -> str | None:
    """The run's --results file (its text) holds the record of stdout, one line; its
    --profile-out, the run's stages."""
    lines = results.splitlines()
    if len(lines) != 1 or json.loads(lines[0]) != record:
        return f"--results holds {len(lines)} line(s), not the record on stdout"
    counts = record["partition"]["layer_counts"]
    if profile.get("kind") != "measured" or profile.get("layer_counts") != counts or \
            len(profile.get("stages", [])) != len(counts):
        return (f"--profile-out holds layer counts {profile.get('layer_counts')} and "
                f"{len(profile.get('stages', []))} stages, the run {counts}")
    return None


def judge_simulation(record: dict, sim: dict, recompute: bool) -> str | None:
    """The run's record and `simulate` of the same point name one schedule: the same family, D,
    N, actions, chunks, stages and partition, and the same activation peak on every rank
    (save where simulate's order or memory may differ: --recompute, which simulate does not
    model; zb-1p and zb-2p, which it plans again for its own costs; replicas)."""
    for key in SAME_IN_SIMULATE:
        if record.get(key) != sim.get(key):
            return f"run says {key} {record.get(key)}, simulate {sim.get(key)}"
    if record["partition"]["layer_counts"] != sim["partition"]["layer_counts"]:
        return (f"run's partition {record['partition']['layer_counts']}, simulate's "
                f"{sim['partition']['layer_counts']}")
    if not recompute and "data_parallel" not in record and record["schedule"] not in PLANNED:
        run_peaks = [r["model"]["activations"] for r in record["memory"]["ranks"]]
        sim_peaks = [r["peak_bytes"] for r in sim["activation_memory"]["ranks"]]
        if run_peaks != sim_peaks:
            return f"activation peaks per rank: run's model {run_peaks}, simulate {sim_peaks}"
    return None


def cross_check(ppbench: str, argv: list[str], stdout: str, tmp: str, timeout: float,
                outputs: bool) -> str | None:
    """What a run that exited 0 broke beyond its record: its output files, or `simulate` of
    the same point (refused, or another schedule)."""
    try:
        record = json.loads(stdout)
    except json.JSONDecodeError:
        return None  # judge says it
    profile = None
    if outputs:
        try:
            with open(os.path.join(tmp, "results.jsonl")) as f:
                results = f.read()
            profile = os.path.join(tmp, "profile.json")
            with open(profile) as f:
                why = judge_outputs(record, results, json.load(f))
        except (OSError, ValueError) as e:
            why = f"an output file is missing or not JSON ({e})"
        if why:
            return why
    command = [ppbench, *simulate_argv(argv, profile)]
    try:
        sim = subprocess.run(command, capture_output=True, text=True, errors="replace",
                             timeout=timeout, cwd=tmp, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"simulate of the same point ran past {timeout:g} s: {shlex.join(command)}"
    if sim.returncode != 0:
        return (f"simulate of the same point exits {sim.returncode}: {shlex.join(command)}: "
                f"{sim.stderr.strip()[-300:]}")
    try:
        return judge_simulation(record, json.loads(sim.stdout), "--recompute" in argv)
    except (ValueError, KeyError, TypeError) as e:
        return f"simulate's record is not what it should be ({e!r})"


def run_case(ppbench: str, case: SimpleNamespace, timeout: float, tmp: str,
             skew: bool = False, cap_bytes: int = 0):
    """(command line, exit code, stdout, stderr, trace or None, what a cross-check found or
    None) of one case; None where the schedule to edit was refused (nothing to explore there);
    exit code None past `timeout`. `skew`: the second emulated node under its own hostname,
    its clock ahead. `cap_bytes`: the address space of a threaded run (0: no cap)."""
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
    for name in ("trace.json", "results.jsonl", "profile.json"):
        if os.path.exists(os.path.join(tmp, name)):
            os.remove(os.path.join(tmp, name))
    if getattr(case, "outputs", False):
        argv += ["--results", os.path.join(tmp, "results.jsonl"), "--profile-out",
                 os.path.join(tmp, "profile.json")]
    command = [ppbench, *argv]
    env = None
    limit = address_space(cap_bytes) if cap_bytes and not case.processes else None
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
                           timeout=timeout, cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                           preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return command, None, "", "", None, None
    trace = None
    if r.returncode == 0 and os.path.exists(trace_path):
        with open(trace_path) as f:
            trace = json.load(f)
    extra = None
    if r.returncode == 0:
        extra = cross_check(ppbench, argv, r.stdout, tmp, timeout,
                            getattr(case, "outputs", False))
    return command, r.returncode, r.stdout, r.stderr, trace, extra


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
                           skew, int(a.memory_cap * 2**30))
            if ran is None:
                codes["not drawn"] = codes.get("not drawn", 0) + 1
                continue
            command, code, out, err, trace, extra = ran
            codes[str(code)] = codes.get(str(code), 0) + 1
            why = (f"past {a.timeout:g} s" if code is None
                   else judge(code, out, err, a.mpirun, trace) or extra)
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
