#!/usr/bin/env python3
"""A pipeline's hand-overs across a link of known rate, under each way OpenMPI's TCP transport
can carry them, with the step the simulator replays beside the measured one.

    benchmarks/pipeline_link.py [--ppbench build/ppbench] [--rate 1gbit] [--burst BYTES]
                                [--schedules 1f1b,zb-h1,gpipe,interleaved-1f1b,dualpipev]
                                [--settings default,send,eager] [--width 1024] [-b 64]
                                [--steps 10] [--repeats 2] [--profile-statistic median]
                                [--out FILE]

Two emulated nodes (scripts/emulated-nodes.sh: a network namespace each, egress shaped to --rate,
one bridge) each run one pipeline rank of `mpirun -np 2 ppbench run --pp 2`: an MLP of 4 layers
of --width, f32, micro-batch -b, N = 8, `--optimizer none`. Every activation and gradient that
crosses between the ranks (b x width x 4 bytes) crosses the link.

The settings are what OpenMPI's TCP transport (btl tcp, OpenMPI 4.1) does with such a message:
  default  its own choice: past 64 KiB a rendezvous (the receiver answers before the rest is
           sent), from 192 KiB with an emulated remote write;
  send     the rendezvous with send/receive fragments only (--mca btl_tcp_flags send,inplace);
  eager    no rendezvous: the eager limit raised above the message (btl_tcp_eager_limit,
           btl_tcp_rndv_eager_limit and btl_tcp_max_send_size), so the sender writes it at once
           and the receiver finds it waiting.
A rendezvous moves only while both processes are inside MPI; ppbench's ranks look between their
actions, so a hand-over can wait for the busy side's action to end. The eager setting shows
what that wait costs.

For each schedule and setting, `repeats` runs: the median step time of each run (median over
the runs), the hand-overs of the last step from its trace (each from when both sides were ready
to when the tensor was in hand: median and largest), the median send call (what a sender spent
in the call that handed a tensor to MPI; across a shaped link the kernel moves an eager
message's bytes inside it, on the sender's core), the measured bubble and the bubble of the
simulator's replay of that step's own costs (the record's `predicted`), the larger of the two
processes' clock-offset uncertainties and how far apart they began the last step. The link
itself is measured first, outside MPI: goodput both ways at once, latency, and one message of a
hand-over's size after an idle moment (when it was all there, and how long its sender's send
call took), with the shaper's bucket (--burst; the record's `link`).

Beside them, the step `simulate --device-profile` gives from the run's own profile as `run
--profile-out` wrote it (`profile_step_s`: every cost of the run, each op's median over the
step, or its mean with --profile-statistic mean; its hand-overs as
measured, rendezvous and all, so without `--eager-limit`, as the replay), and the step the
simulator models without any hand-over, send call or receive of the run itself
(`modelled_step_s`): `simulate --device-profile` with the run's own action times (`run
--profile-out`), each hand-over as long as one through the transport by that setting with both
ranks inside MPI and each send call holding its sender as long as the transport's did there (the
record's `transport`: 1F1B on an MLP of two layers of width 8, whose actions take microseconds,
with hand-overs of the same size; the medians of its last step's, its hand-overs told apart as
the replay does: those whose receiver waited span the whole hand-over, those whose tensor had
been sent before its receive was posted only the receiver's taking in, charged as `recv`, the
rest as the latency);
`modelled_step_without_send_s` the same with send calls that cost nothing (the model before
send calls were timed); and `modelled_step_socket_s` with each hand-over and send call the
socket's one message instead (and no receive cost); for the
default and send settings, `--eager-limit 65536` (OpenMPI's TCP eager limit): past it a tensor
leaves only once its receiver has reached the action that needs it and its sender is between
actions.

Writes one JSON record (atomically), default results/perf/pipeline-link/<commit>.json, with
provenance, and prints a table. Needs root (network namespaces) and iproute2; the nodes are
removed at the end, also after a failure.

Exit codes: 0 done; 2 a bad option or no ppbench at --ppbench; 3 the machine cannot (no mpirun,
no MPI in ppbench, not root, no namespaces or tbf); 1 a run failed (its command and last line).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from link_nodes import (emulated, link_parser, measure_link, node_names, on_nodes,
                        require_settings, simulate)
from mpi_bench import Failure, name_list, positive, record_benchmark
from script_cli import run

SCHEDULES = ["1f1b", "zb-h1", "gpipe", "interleaved-1f1b", "dualpipev"]
SETTINGS = ["default", "send", "eager"]
OPENMPI_TCP_EAGER_LIMIT = 65536  # btl_tcp_eager_limit's default (OpenMPI 4.1)
MICROBATCHES = 8
PROBE_WIDTH = 8  # the transport probe's MLP: actions of microseconds, hand-overs of any size


def hand_over_bytes(width: int, microbatch: int) -> int:
    return microbatch * width * 4  # f32 activations (and their gradients) between the stages


def setting_mca(setting: str, message_bytes: int) -> list[str]:
    """mpirun's options for a setting; eager's limit is the next power of two above the message
    and its header."""
    if setting == "send":
        return ["--mca", "btl_tcp_flags", "send,inplace"]
    if setting == "eager":
        limit = 1 << (message_bytes + 4096 - 1).bit_length()
        return [opt for name in ("btl_tcp_eager_limit", "btl_tcp_rndv_eager_limit",
                                 "btl_tcp_max_send_size")
                for opt in ("--mca", name, str(limit))]
    return []


def step_args(a: argparse.Namespace, schedule: str) -> list[str]:
    """The workload and schedule, for `run` and `simulate` alike."""
    return ["--workload", "mlp", "--layers", "4", "--width", str(a.width),
            "-b", str(a.microbatch_size), "--dtype", "f32", "--schedule", schedule, "--pp", "2",
            "-n", str(MICROBATCHES)]


def modelled_step(a: argparse.Namespace, profile: Path, schedule: str, setting: str,
                  link: dict, costs: dict) -> float:
    """The step `simulate` predicts from the run's own action times (its measured profile), the
    hand-overs costing what `costs` says (a profile's `comm`, `recv` and `send`: probe_costs),
    and past OpenMPI's eager limit (all but the eager setting) by rendezvous, each control message
    taking the link's latency."""
    measured = json.loads(profile.read_text())
    stages = measured["stages"]
    for k, stage in enumerate(stages):
        # Every stage takes inputs in from another rank; only those before the last hand any on.
        last = k + 1 == len(stages)
        stage["recv"] = costs["recv"]
        stage["comm"] = 0 if last else costs["comm"]
        stage["send"] = 0 if last else costs["send"]
    measured["link_latency"] = link["latency_s"]
    model = profile.with_name("model.json")
    model.write_text(json.dumps(measured))
    eager_limit = [] if setting == "eager" else ["--eager-limit", str(OPENMPI_TCP_EAGER_LIMIT)]
    return simulate(a.ppbench, *step_args(a, schedule), "--device-profile", str(model),
                    *eager_limit)["makespan"]


def trace_hand_overs(trace: Path, what: str) -> tuple[list[dict], list[float]]:
    """The hand-overs of a run's `--trace-out` (their events: `dur` in us, `args.queued` where
    the tensor had been sent before its receive was posted), and the mean span (s) of each
    action's timed send calls; Failure naming `what` if there is no hand-over."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    hand_overs = [e for e in events if e.get("cat") == "comm"]
    if not hand_overs:
        raise Failure(f"{what}: the trace holds no hand-over between the two ranks")
    sends = [e["args"]["send_us"] * 1e-6 / e["args"]["sends"] for e in events
             if e.get("args", {}).get("sends")]
    return hand_overs, sends


def seconds(events: list[dict]) -> list[float]:
    return [e["dur"] * 1e-6 for e in events]


def median_or_zero(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def probe_costs(probe: dict, send: bool = True) -> dict:
    """A hand-over's costs as the transport probe measured them, split as the replay splits
    them: a receive that found its tensor sent took the receiver's own work (`recv`), one that
    waited that and the latency (`comm` is the rest); each send call holds its sender `send`."""
    return {"comm": max(probe["waited_s"] - probe["queued_s"], 0.0), "recv": probe["queued_s"],
            "send": probe["send_call_s"] if send else 0.0}


def transport_probe(a: argparse.Namespace, mpirun: str, network: str, mca: list[str],
                    tmp: Path) -> dict:
    """One hand-over through ppbench's MPI transport by a setting, with both ranks inside MPI
    nearly all the time: 1F1B on an MLP of 2 layers of width 8 (actions of microseconds) whose
    micro-batch makes each hand-over the benchmark's size (rounded up to 32 bytes), N = 16: the
    medians of the last step's hand-overs (all of them; those whose receiver waited; those whose
    tensor was sent before its receive was posted) and of its send calls."""
    microbatch = -(-hand_over_bytes(a.width, a.microbatch_size) // (PROBE_WIDTH * 4))
    trace = tmp / "probe.json"
    r = on_nodes(mpirun, node_names(2), network, tmp, a.ppbench, "run", "--workload", "mlp",
                 "--layers", "2", "--width", str(PROBE_WIDTH), "-b", str(microbatch),
                 "--dtype", "f32", "--schedule", "1f1b", "--pp", "2", "-n", "16", "--steps", "5",
                 "--warmup", "2", "--optimizer", "none", "--format", "json", "--trace-out",
                 str(trace), mca=tuple(mca))
    require_settings(json.loads(r.stdout), mca, "the transport probe")
    hand_overs, sends = trace_hand_overs(trace, "the transport probe")
    queued = [e for e in hand_overs if e["args"].get("queued")]
    waited = [e for e in hand_overs if not e["args"].get("queued")]
    return {"bytes": microbatch * PROBE_WIDTH * 4,
            "hand_over_s": statistics.median(seconds(hand_overs)), "hand_overs": len(hand_overs),
            # A hand-over whose receiver waited spans it whole; one whose tensor was sent before
            # its receive was posted spans only what the receiver still had to take in.
            "waited_s": median_or_zero(seconds(waited)), "waited": len(waited),
            "queued_s": median_or_zero(seconds(queued)), "queued": len(queued),
            "send_call_s": median_or_zero(sends)}


def run_once(a: argparse.Namespace, mpirun: str, network: str, schedule: str, setting: str,
             mca: list[str], link: dict, probe: dict, tmp: Path) -> dict:
    trace, profile = tmp / "trace.json", tmp / "profile.json"
    r = on_nodes(mpirun, node_names(2), network, tmp, a.ppbench, "run", *step_args(a, schedule),
                 "--steps", str(a.steps), "--warmup", "2", "--optimizer", "none",
                 "--format", "json", "--trace-out", str(trace), "--profile-out", str(profile),
                 "--profile-statistic", a.profile_statistic, mca=tuple(mca))
    rec = json.loads(r.stdout)
    require_settings(rec, mca, schedule)
    procs = rec["data_parallel"]["per_process"]
    hand_overs, sends = trace_hand_overs(trace, schedule)
    return {"step_s": statistics.median(rec["step_times_s"]),
            "hand_over_median_s": statistics.median(seconds(hand_overs)),
            "hand_over_max_s": max(seconds(hand_overs)),
            "send_call_median_s": median_or_zero(sends),
            "measured_bubble": rec["measured"]["bubble_fraction"],
            "predicted_bubble": rec["predicted"]["bubble_fraction"],
            # As the replay: the hand-overs as measured, rendezvous and all, so no --eager-limit.
            "profile_step_s": simulate(a.ppbench, *step_args(a, schedule), "--device-profile",
                                       str(profile))["makespan"],
            "modelled_step_s": modelled_step(a, profile, schedule, setting, link,
                                             probe_costs(probe)),
            "modelled_step_without_send_s": modelled_step(a, profile, schedule, setting, link,
                                                          probe_costs(probe, send=False)),
            "modelled_step_socket_s": modelled_step(
                a, profile, schedule, setting, link,
                {"comm": link["message"]["arrived_s"], "recv": 0.0,
                 "send": link["message"]["send_call_s"]}),
            "busy_s": [rank["busy"] for rank in rec["measured"]["ranks"]],
            # How well the two processes' clocks were aligned for the merged trace, and how far
            # apart they began the last step.
            "clock_offset_uncertainty_s": max(p["clock_offset_uncertainty_s"] for p in procs),
            "step_start_spread_s": (max(p["step_start_s"] for p in procs)
                                    - min(p["step_start_s"] for p in procs)),
            "hosts": sorted({p["host"] for p in procs})}


def measure(a: argparse.Namespace, mpirun: str, result: dict) -> None:
    names = node_names(2)
    message = hand_over_bytes(a.width, a.microbatch_size)
    with emulated(names, a.rate, a.burst) as made, \
            tempfile.TemporaryDirectory(prefix="pipeline_link-") as tmp:
        print(f"2 emulated nodes, each link {a.rate}; measuring the link", flush=True)
        result["link"] = measure_link(made, names, message)
        result["hand_over_bytes"] = message
        result["settings"] = {s: setting_mca(s, message) for s in a.settings}
        print("  one hand-over through the transport, by each setting", flush=True)
        result["transport"] = {s: transport_probe(a, mpirun, made.network, result["settings"][s],
                                                  Path(tmp)) for s in a.settings}
        rows = []
        for schedule in a.schedules:
            for setting in a.settings:
                runs = [run_once(a, mpirun, made.network, schedule, setting,
                                 result["settings"][setting], result["link"],
                                 result["transport"][setting], Path(tmp))
                        for _ in range(a.repeats)]
                if runs[0]["hosts"] != names:
                    raise Failure(f"{schedule}: the ranks ran on {runs[0]['hosts']}, not on "
                                  f"the two nodes {names}")
                row = {"schedule": schedule, "setting": setting, "runs": runs}
                for key in ("step_s", "profile_step_s", "modelled_step_s",
                            "modelled_step_without_send_s",
                            "modelled_step_socket_s", "hand_over_median_s", "hand_over_max_s",
                            "send_call_median_s",
                            "measured_bubble", "predicted_bubble", "clock_offset_uncertainty_s",
                            "step_start_spread_s"):
                    row[key] = statistics.median(run[key] for run in runs)
                rows.append(row)
                print(f"  {schedule:17} {setting:8} step {row['step_s'] * 1e3:7.1f} ms "
                      f"(modelled {row['modelled_step_s'] * 1e3:7.1f})  hand-overs "
                      f"{row['hand_over_median_s'] * 1e3:5.2f} ms median", flush=True)
        result["rows"] = rows


def print_table(result: dict) -> None:
    link = result["link"]
    message = link["message"]
    print(f"\nlink {result['rate']} (bucket {link['burst_bytes']} bytes): goodput "
          f"{link['goodput_bytes_per_s'] / 1e6:.1f} MB/s both ways at once, latency "
          f"{link['latency_s'] * 1e6:.1f} us; each hand-over {result['hand_over_bytes'] / 1024:.0f}"
          f" KiB: through a socket alone {message['arrived_s'] * 1e3:.2f} ms (its bytes at the "
          f"goodput {message['at_goodput_s'] * 1e3:.2f}; the send call "
          f"{message['send_call_s'] * 1e3:.2f}), through the transport "
          + ", ".join(f"{s} {p['hand_over_s'] * 1e3:.2f} (send call {p['send_call_s'] * 1e3:.2f})"
                      for s, p in result["transport"].items())
          + " ms")
    print(f"{'schedule':<17} {'setting':<8} {'step ms':>8} {'vs default':>10} {'profile':>8} "
          f"{'model ms':>8} "
          f"{'no send':>8} {'by socket':>9} {'hand-over ms':>12} {'largest':>8} {'send ms':>7} "
          f"{'bubble':>7} {'replay':>7}")
    default = {r["schedule"]: r["step_s"] for r in result["rows"] if r["setting"] == "default"}
    for r in result["rows"]:
        base = default.get(r["schedule"])
        change = f"{r['step_s'] / base - 1:+.0%}" if base else ""
        print(f"{r['schedule']:<17} {r['setting']:<8} {r['step_s'] * 1e3:8.1f} {change:>10} "
              f"{r['profile_step_s'] * 1e3:8.1f} "
              f"{r['modelled_step_s'] * 1e3:8.1f} {r['modelled_step_without_send_s'] * 1e3:8.1f} "
              f"{r['modelled_step_socket_s'] * 1e3:9.1f} {r['hand_over_median_s'] * 1e3:12.2f} "
              f"{r['hand_over_max_s'] * 1e3:8.2f} {r['send_call_median_s'] * 1e3:7.2f} "
              f"{r['measured_bubble']:7.3f} {r['predicted_bubble']:7.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = link_parser("pipeline_link", __doc__.splitlines()[0], "pipeline-link")
    ap.add_argument("--schedules", type=name_list(SCHEDULES, "schedule"), default=SCHEDULES,
                    help=f"comma-separated, of {', '.join(SCHEDULES)} (default all)")
    ap.add_argument("--settings", type=name_list(SETTINGS, "setting"), default=SETTINGS,
                    help="how OpenMPI carries the hand-overs: default, send (fragments), eager "
                         "(no rendezvous); comma-separated; default all three")
    ap.add_argument("--width", type=positive, default=1024,
                    help="MLP width (16 to 4096; default 1024)")
    ap.add_argument("-b", "--microbatch-size", type=positive, default=64,
                    help="samples per micro-batch (1 to 1024; default 64)")
    ap.add_argument("--steps", type=positive, default=10, help="measured steps per run")
    ap.add_argument("--repeats", type=positive, default=2, help="runs of each point")
    ap.add_argument("--profile-statistic", choices=("median", "mean"), default="median",
                    help="how each run's profile, which the profile and model columns simulate, "
                         "sums up an op's times (run --profile-statistic; default median)")
    a = ap.parse_args(argv)
    if not 16 <= a.width <= 4096:
        ap.error(f"--width {a.width}: must be 16 to 4096")
    if a.microbatch_size > 1024:
        ap.error(f"-b {a.microbatch_size}: must be 1 to 1024")
    result: dict = {"benchmark": "pipeline_link", "rate": a.rate, "width": a.width,
                    "microbatch_size": a.microbatch_size, "microbatches": MICROBATCHES,
                    "steps": a.steps, "repeats": a.repeats,
                    "profile_statistic": a.profile_statistic}
    return record_benchmark("pipeline_link", "pipeline-link", a.ppbench, result,
                            lambda mpirun, result: measure(a, mpirun, result), print_table, a.out)


if __name__ == "__main__":
    sys.exit(run("pipeline_link", main))
