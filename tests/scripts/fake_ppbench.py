#!/usr/bin/env python3
"""A stand-in for `ppbench simulate` and `ppbench run` used by the tests of scripts/.

It speaks the same contract as the real CLI: one JSON object on stdout, or exit 2 with a
one-line message on stderr for parameters a schedule does not allow. GPipe and 1F1B are really
scheduled and simulated (uniform costs), so their numbers and traces are the true ones; the other
schedules report 1F1B's timing with their own name (enough to exercise the scripts).

`run` answers with the record of a real run: "measured" is the simulation with every F taking
10% longer on the last rank than predicted (so measured and predicted differ), "predicted" the
plain simulation; times are seconds (1 cost unit = 1 ms); activation bytes are peak activations x
the workload's bytes per activation (--width, or 1000), equal measured and modelled. Workload
"broken" exits 2 like a workload that cannot run yet; schedule "slow" sleeps 30 s.

`run --backend cuda --virtual-devices D` answers like a GPU run on a 132-SM GPU split into D
partitions of 128/D SMs (the record's "gpu" object); with FAKE_PPBENCH_NO_GPU set, --backend cuda
exits 2 as ppbench does on a machine without a GPU.

`list --format json` prints a registry of the ten schedules (ppbench's order and shape);
`--version` prints ppbench's version lines, with "GPU 0: Fake H100, ..." and "CUDA runtime 13.0,
driver <FAKE_PPBENCH_DRIVER, default 13.0>, ..." when FAKE_PPBENCH_GPU is set, and "MPI: compiled
in" unless FAKE_PPBENCH_NO_MPI is set. `run --dp R` needs a launcher: it
exits 2 unless OMPI_COMM_WORLD_SIZE (set by mpirun, or by the tests' fake mpirun in conftest.py)
is D x R; under one the record has "launch" as a multi-process run's. Records' provenance names
commit FAKE_PPBENCH_COMMIT (default fake123) on host FAKE_PPBENCH_HOST (default testhost).

Test hooks: schedule "crash" exits 1, as does the schedule FAKE_PPBENCH_CRASH names; "garbage"
prints non-JSON; "slow" (simulate or run) writes its pid to FAKE_PPBENCH_PIDFILE when that is set,
then sleeps 30 s; when FAKE_PPBENCH_LOG is set, every invocation's arguments are appended to that
file as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

CLOSED_FORMS = {
    "naive": "(D-1)/D",
    "gpipe": "(D-1)/(D-1+N)",
    "1f1b": "(D-1)/(D-1+N)",
    "interleaved-1f1b": "(D-1)/(D-1+vN)",
    "chimera": "(D-2)/(D-2+2N)",
}


REGISTRY = [  # (name, uses_chunks, bubble formula, idle formula, activations formula, params)
    ("naive", False, "(D-1)/D", "(D-1)N(F+B)", "1", "1x"),
    ("gpipe", False, "(D-1)/(D-1+N)", "(D-1)(F+B)", "N", "1x"),
    ("1f1b", False, "(D-1)/(D-1+N)", "(D-1)(F+B)", "D-r on rank r", "1x"),
    ("interleaved-1f1b", True, "(D-1)/(D-1+vN)", "(D-1)(F+B)", "", "1x"),
    ("chimera", False, "(D-2)/(D-2+2N) with F = B", "(D/2-1)(F+B) with F = B", "D", "2x"),
    ("zb-h1", False, "idle / (idle + N(F+I+W))", "(D-1)(F+I-W) when W <= F, I", "D", "1x"),
    ("zb-h2", False, "idle / (idle + N(F+I+W))", "(D-1)(F+I-2W)", "2D-1", "1x"),
    ("zb-v", False, "idle / (idle + 2N(F+I+W))", "(D-1)F when F = I = W", "2D chunks", "1x"),
    ("dualpipe", False, "idle / (idle + N(F+B))",
     "(PP/2-1)(F&B+B-3W) on the most idle rank, PP = D", "PP+1 on every rank", "2x"),
    ("dualpipev", False, "idle / (idle + 2N(F+B))",
     "(PP/2-1)(F&B+B-3W) on the most idle rank, PP = 2D stages", "PP+1 = 2D+1 on every rank", "2x"),
]


def list_main() -> None:
    print(json.dumps({"schedules": [
        {"name": name, "title": f"{name} (fake)", "source": "fake_ppbench", "constraints": "-",
         "layout": "-", "uses_chunks": chunks,
         "closed_form": {"bubble_fraction": bubble, "idle_per_rank": idle,
                         "peak_activations": act, "parameters": params}}
        for name, chunks, bubble, idle, act, params in REGISTRY]}))


def version_main() -> None:
    print("ppbench 0.1.0 (fake, built without CUDA)" if not os.environ.get("FAKE_PPBENCH_GPU")
          else "ppbench 0.1.0 (CUDA support compiled in)\n"
               "GPU 0: Fake H100, 132 SMs, 79.1 GiB, compute capability 9.0\n"
               f"CUDA runtime 13.0, driver {os.environ.get('FAKE_PPBENCH_DRIVER', '13.0')}, "
               "cuBLASLt 13.1.0")
    if not os.environ.get("FAKE_PPBENCH_NO_MPI"):
        print("MPI: compiled in (mpirun -np P ppbench run ... runs one pipeline rank per process)")


def provenance() -> dict:
    return {"ppbench_version": "0.1.0",
            "git_commit": os.environ.get("FAKE_PPBENCH_COMMIT", "fake123"),
            "host": os.environ.get("FAKE_PPBENCH_HOST", "testhost"), "cpu": "Test CPU",
            "cpu_cores": 2, "compiler": "g++ 12", "date": "2026-11-21T10:00:00Z",
            "cuda": "not compiled"}


def be_slow() -> None:
    if os.environ.get("FAKE_PPBENCH_PIDFILE"):
        with open(os.environ["FAKE_PPBENCH_PIDFILE"], "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
    time.sleep(30)


def fail(message: str, code: int = 2) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


def check(s: str, d: int, n: int, v: int) -> None:
    rules = {
        "1f1b": (n >= d, "1f1b needs N >= D"),
        "zb-h1": (n >= d, "zb-h1 needs N >= D"),
        "zb-h2": (n >= 2 * d - 1, "zb-h2 needs N >= 2D-1"),
        "zb-v": (n >= 2 * d, "zb-v needs N >= 2D"),
        "dualpipev": (n >= 2 * d, "dualpipev needs N >= 2D"),
        "dualpipe": (d % 2 == 0 and n % 2 == 0 and n >= 2 * d,
                     "dualpipe needs D even, N even, N >= 2D"),
        "chimera": (d % 2 == 0 and n % d == 0, "chimera needs D even and N a multiple of D"),
        "interleaved-1f1b": (v >= 2, "interleaved-1f1b needs --chunks >= 2"),
    }
    if s not in CLOSED_FORMS and s not in rules and s not in ("crash", "garbage", "slow"):
        fail(f"unknown schedule '{s}'")
    ok, message = rules.get(s, (True, ""))
    if not ok:
        fail(f"invalid parameters: {message} (got D={d}, N={n})")


def rank_orders(s: str, d: int, n: int) -> list[list[tuple[str, int]]]:
    """Per-rank (op, mb) order: GPipe (all F then all B), naive (F..B per mb) or 1F1B."""
    orders = []
    for r in range(d):
        if s == "gpipe":
            orders.append([("F", m) for m in range(n)] + [("B", m) for m in range(n)])
        elif s == "naive":
            orders.append([x for m in range(n) for x in (("F", m), ("B", m))])
        else:
            warm = min(d - r - 1, n)
            order = [("F", m) for m in range(warm)]
            for m in range(warm, n):
                order += [("F", m), ("B", m - warm)]
            order += [("B", m) for m in range(n - warm, n)]
            orders.append(order)
    return orders


def simulate(s: str, d: int, n: int, f: float,
             b: float) -> list[tuple[int, str, int, float, float]]:
    """(rank, op, mb, start, end) of every action, list-scheduled in rank order."""
    return simulate_with(s, d, n, lambda _rank, op: f if op == "F" else b)


def peak_alive(events: list, rank: int) -> int:
    alive = peak = 0
    for _, op, _, _, _ in sorted((e for e in events if e[0] == rank), key=lambda e: e[3]):
        alive += 1 if op == "F" else -1
        peak = max(peak, alive)
    return peak


def closed_bubble(s: str, d: int, n: int, v: int) -> float | None:
    return {"naive": (d - 1) / d, "gpipe": (d - 1) / (d - 1 + n), "1f1b": (d - 1) / (d - 1 + n),
            "interleaved-1f1b": (d - 1) / (d - 1 + v * n),
            "chimera": (d - 2) / (d - 2 + 2 * n)}.get(s)


def parse_cost(text: str) -> dict[str, float]:
    costs = {"F": 1.0, "B": 2.0, "I": 1.0, "W": 1.0}
    for part in filter(None, text.split(",")):
        key, value = part.split("=")
        costs[key] = float(value)
    if "I" in text or "W" in text:
        costs["B"] = costs["I"] + costs["W"]
    costs["FB"] = costs["F"] + costs["B"]
    return costs


def main() -> None:
    if os.environ.get("FAKE_PPBENCH_LOG"):
        with open(os.environ["FAKE_PPBENCH_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps(sys.argv[1:]) + "\n")
    if sys.argv[1:2] == ["run"]:
        run_main()
        return
    if sys.argv[1:2] == ["list"]:
        list_main()
        return
    if sys.argv[1:2] == ["--version"]:
        version_main()
        return
    p = argparse.ArgumentParser()
    p.add_argument("command")
    p.add_argument("--schedule", required=True)
    p.add_argument("--devices", type=int, required=True)
    p.add_argument("--microbatches", type=int, required=True)
    p.add_argument("--chunks", type=int, default=1)
    p.add_argument("--group-size", type=int, default=0)
    p.add_argument("--cost", default="")
    p.add_argument("--comm", type=float, default=0.0)
    p.add_argument("--format", default="text")
    p.add_argument("--trace-out")
    a = p.parse_args()
    s, d, n, v = a.schedule, a.devices, a.microbatches, a.chunks
    check(s, d, n, v)
    if s in ("crash", os.environ.get("FAKE_PPBENCH_CRASH")):
        fail("Segmentation fault (pretend)", 1)
    if s == "garbage":
        print("this is not json")
        return
    if s == "slow":
        be_slow()
    costs = parse_cost(a.cost)
    costs["comm"] = a.comm
    events = simulate(s if s in ("gpipe", "naive") else "1f1b", d, n, costs["F"], costs["B"])
    makespan = max(e[4] for e in events)
    busy = n * (costs["F"] + costs["B"])
    peaks = [peak_alive(events, r) for r in range(d)]
    idle = makespan - busy
    bubble = closed_bubble(s, d, n, v)
    flush = s in ("gpipe", "1f1b")  # the schedules whose idle time has a closed form here
    result = {
        "schedule": s, "devices": d, "microbatches": n, "chunks": v, "group_size": a.group_size,
        "stages": d * v, "actions": 2 * d * n, "costs": costs, "makespan": makespan,
        "bubble_fraction": idle / makespan, "bubble_ratio": idle / busy,
        "zb_bubble_rate": idle / makespan, "total_busy": busy * d,
        "peak_activations": max(peaks), "peak_activation_share": max(peaks) / d,
        "param_copies": 2 if s in ("chimera", "dualpipe", "dualpipev") else 1,
        "ranks": [{"rank": r, "busy": busy, "idle": idle, "span_idle": 0,
                   "peak_activations": peaks[r], "peak_activation_share": peaks[r] / d}
                  for r in range(d)],
        "closed_form": {"bubble_formula": CLOSED_FORMS.get(s, "-"), "bubble_fraction": bubble,
                        "idle_formula": "(D-1)(F+B)" if flush else None,
                        "idle_per_rank": (d - 1) * (costs["F"] + costs["B"]) if flush else None,
                        "activations_formula": "D-r on rank r",
                        "peak_activations": d if s == "1f1b" else None,
                        "params": "1x", "note": None},
        "provenance": provenance(),
    }
    if a.trace_out:
        write_trace(a.trace_out, events, result)
    print(json.dumps(result))


def metrics(events: list, d: int, makespan: float) -> dict:
    busy = [sum(e[4] - e[3] for e in events if e[0] == r) for r in range(d)]
    idle = [makespan - b for b in busy]
    peaks = [peak_alive(events, r) for r in range(d)]
    return {"makespan": makespan, "bubble_fraction": sum(idle) / (d * makespan),
            "bubble_ratio": sum(idle) / sum(busy), "zb_bubble_rate": sum(idle) / (d * makespan),
            "peak_activations": max(peaks),
            "ranks": [{"rank": r, "busy": busy[r], "idle": idle[r], "span_idle": 0,
                       "peak_activations": peaks[r]} for r in range(d)]}


def run_main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("command")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--workload", required=True)
    p.add_argument("--width", type=int, default=1000)
    p.add_argument("--schedule", required=True)
    p.add_argument("--devices", "--pp", type=int, required=True)
    p.add_argument("--microbatches", "-n", type=int, required=True)
    p.add_argument("--chunks", type=int, default=1)
    p.add_argument("--group-size", type=int, default=0)
    p.add_argument("--microbatch-size", "-b", type=int, default=1)
    p.add_argument("--dtype", default="f32")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--recompute", action="store_true")
    p.add_argument("--format", default="text")
    p.add_argument("--trace-out")
    p.add_argument("--virtual-devices", type=int)
    p.add_argument("--dp", type=int, default=1)
    a, extra = p.parse_known_args()  # other workload flags (--preset, --layers, ...) accepted
    s, d, n, v = a.schedule, a.devices, a.microbatches, a.chunks
    # Started by mpirun (the tests' fake one sets what OpenMPI sets): P must be D x R.
    processes = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "0"))
    if a.dp > 1 and not processes:
        fail(f"ppbench: error: --dp {a.dp} needs one process per rank: mpirun -np {d * a.dp}")
    if processes and processes != d * a.dp:
        fail(f"ppbench: error: {processes} processes, but --pp {d} x --dp {a.dp} = {d * a.dp}")
    if a.workload == "broken":
        fail("ppbench: error: the broken workload does not run on the CPU backend yet")
    if a.virtual_devices is not None and a.backend != "cuda":
        fail("ppbench: error: --gpus, --virtual-devices, ... need --backend cuda")
    if a.virtual_devices is not None and a.virtual_devices != d:
        fail(f"ppbench: error: --virtual-devices {a.virtual_devices} differs from --devices {d}")
    check(s, d, n, v)
    if a.backend == "cuda" and os.environ.get("FAKE_PPBENCH_NO_GPU"):
        fail("ppbench: error: --backend cuda: no CUDA device visible (cudaErrorNoDevice)", 3)
    if s in ("crash", os.environ.get("FAKE_PPBENCH_CRASH")):
        fail("Segmentation fault (pretend)", 1)
    if s == "slow":
        be_slow()
    unit = 1e-3  # seconds per cost unit
    kind = s if s in ("gpipe", "naive") else "1f1b"
    predicted = simulate(kind, d, n, 1.0, 2.0)
    measured = simulate_with(kind, d, n,
                             lambda r, op: (1.1 if r == d - 1 else 1.0) if op == "F" else 2.0)
    pred = metrics(predicted, d, max(e[4] for e in predicted))
    meas = metrics(measured, d, max(e[4] for e in measured))
    for m in (pred, meas):
        m["makespan"] *= unit
        for rank in m["ranks"]:
            rank["busy"] *= unit
            rank["idle"] *= unit
    step = meas["makespan"]
    samples = n * a.microbatch_size
    act = [{"rank": r, "measured_peak_bytes": float(meas["ranks"][r]["peak_activations"] * a.width),
            "model_peak_bytes": float(pred["ranks"][r]["peak_activations"] * a.width)}
           for r in range(d)]
    result = {
        "command": "run", "backend": a.backend, "schedule": s, "devices": d, "microbatches": n,
        "chunks": v, "group_size": a.group_size, "stages": d * v, "actions": 2 * d * n,
        "workload": a.workload, "workload_config": {"extra": extra},
        "microbatch_size": a.microbatch_size, "dtype": a.dtype, "steps": a.steps,
        "warmup": a.warmup, "seed": a.seed, "recompute": a.recompute,
        "partition": {"method": "balanced", "layer_counts": [1] * (d * v)}, "params": 4242,
        "step_time_s": step, "step_times_s": [step] * a.steps,
        "throughput": {"samples_per_s": samples / step},
        "measured": meas, "predicted": pred,
        "fidelity": {"bubble_fraction_gap": meas["bubble_fraction"] - pred["bubble_fraction"]},
        "activation_bytes": act, "loss": 2.5, "grad_norm": 0.75,
        "provenance": provenance(),
    }
    if a.backend == "cuda" and a.virtual_devices:
        k = 128 // d // 8 * 8
        result["gpu"] = {"placement": f"GPU 0 split into {d} virtual devices (green contexts)",
                         "gpu_names": ["Fake H100"] * d, "transport": "device-to-device copies",
                         "sms_per_rank": [k] * d,
                         "partitions": {"requested": {"total_sms": 132, "partitions": d,
                                                      "sms_per_partition": k,
                                                      "idle_sms": 132 - d * k},
                                        "granted_sms": [k] * d, "as_requested": True}}
    if processes:
        result["launch"] = {"transport": "mpi", "processes": processes, "pipeline_ranks": d,
                            "replicas": a.dp}
    if a.trace_out:
        events = [(r, op, m, t0 * 1000 * unit, t1 * 1000 * unit) for r, op, m, t0, t1 in measured]
        # hand-overs of 1 us between threads, 5 us between processes
        write_trace(a.trace_out, events, result, time_unit="s",
                    handover_us=5.0 if processes else 1.0)
    print(json.dumps(result))


def simulate_with(s: str, d: int, n: int, cost) -> list[tuple[int, str, int, float, float]]:
    """(rank, op, mb, start, end) of every action, list-scheduled in rank order, an action of
    rank r taking cost(r, op)."""
    orders = rank_orders(s, d, n)
    done: dict[tuple[str, int, int], float] = {}
    pos, clock, events = [0] * d, [0.0] * d, []
    while any(pos[r] < len(orders[r]) for r in range(d)):
        progressed = False
        for r in range(d):
            while pos[r] < len(orders[r]):
                op, m = orders[r][pos[r]]
                if op == "F":
                    dep = ("F", r - 1, m) if r > 0 else (
                        ("B", 0, m - 1) if s == "naive" and m > 0 else None)
                else:
                    dep = ("B", r + 1, m) if r < d - 1 else ("F", r, m)
                if dep is not None and dep not in done:
                    break
                start = max(clock[r], done[dep] if dep else 0.0)
                end = start + cost(r, op)
                done[(op, r, m)] = end
                clock[r] = end
                events.append((r, op, m, start, end))
                pos[r] += 1
                progressed = True
        if not progressed:
            fail("deadlock in fake schedule", 1)
    return events


def write_trace(path: str, events: list, result: dict, time_unit: str = "unit",
                handover_us: float | None = None) -> None:
    """Chrome trace events of the steps; with handover_us, also a comm event of that length
    after every F sent down and every B sent up the pipeline, as a real run's trace has."""
    trace = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": r, "args": {"name": f"rank {r}"}}
             for r in range(result["devices"])]
    for r, op, m, start, end in events:
        trace.append({"name": f"{op}{r}.{m}", "cat": op, "ph": "X", "pid": 0, "tid": r,
                      "ts": start * 1000, "dur": (end - start) * 1000,
                      "args": {"stage": r, "mb": m}})
        peer = r + 1 if op == "F" else r - 1
        if handover_us is not None and 0 <= peer < result["devices"]:
            trace.append({"name": f"{op}{r}.{m} {r}->{peer}", "cat": "comm", "ph": "X", "pid": 1,
                          "tid": r * result["devices"] + peer, "ts": end * 1000,
                          "dur": handover_us, "args": {"src": r, "dst": peer}})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": trace, "displayTimeUnit": "ms",
                   "otherData": {k: result[k]
                                 for k in ("schedule", "devices", "microbatches", "chunks")}
                   | {"time_unit": time_unit} | (
                       {k: result["provenance"][k] for k in ("cpu", "cpu_cores", "host")}
                       if time_unit == "s" else {})}, f)


if __name__ == "__main__":
    main()
