"""Tests of scripts/plot_timeline.py and scripts/plot_bubble.py on synthetic data."""

from __future__ import annotations

import json
import subprocess
import sys

from matplotlib.figure import Figure

import plot_bubble
import plot_timeline
from conftest import SCRIPTS, result_row, write_jsonl
from script_cli import run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def event(name: str, cat: str, rank: int, start: float, dur: float, stage: int, mb: int) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "pid": 0, "tid": rank, "ts": start * 1000,
            "dur": dur * 1000, "args": {"stage": stage, "mb": mb}}


def small_trace() -> dict:
    events = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": r, "args": {"name": f"rank {r}"}}
              for r in range(2)]
    events += [event("F0.0", "F", 0, 0, 1, 0, 0), event("F1.0", "F", 1, 1, 1, 1, 0),
               event("I1.0", "I", 1, 2, 1, 1, 0), event("W1.0", "W", 1, 3, 1, 1, 0),
               event("B0.0", "B", 0, 3, 2, 0, 0),
               event("(F0.1+B3.0)", "FB", 0, 5, 3, 0, 1)]
    events.append({"name": "send", "cat": "comm", "ph": "X", "pid": 1, "tid": 0, "ts": 1000,
                   "dur": 200})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"schedule": "test", "devices": 2, "microbatches": 2, "chunks": 1,
                          "time_unit": "unit"}}


def big_trace(ranks: int = 16, per_rank: int = 1000) -> dict:
    events = []
    for r in range(ranks):
        t = float(r)
        for k in range(per_rank):
            op = "F" if k % 2 == 0 else "B"
            dur = 1.0 if op == "F" else 2.0
            events.append(event(f"{op}{r}.{k // 2}", op, r, t, dur, r, k // 2))
            t += dur
    return {"traceEvents": events, "otherData": {"schedule": "big", "devices": ranks,
                                                 "microbatches": per_rank // 2, "chunks": 1}}


def test_boxes_parse_actions_pairs_and_ranks():
    boxes, ranks = plot_timeline.build_boxes(plot_timeline.compute_events(small_trace()))
    assert ranks == 2
    assert len(boxes) == 6  # the comm event is not a compute box
    pair = next(b for b in boxes if b.op == "FB")
    assert pair.label == "0.1+3.0"  # rank 0 holds stages 0 and 3, so labels carry the stage
    assert pair.start == 5 and pair.dur == 3


def test_single_stage_ranks_are_labelled_by_microbatch():
    boxes, _ = plot_timeline.build_boxes(plot_timeline.compute_events(big_trace(2, 6)))
    assert [b.label for b in boxes if b.rank == 0] == ["0", "0", "1", "1", "2", "2"]
    assert boxes[0].shade == 0 and boxes[-1].shade > boxes[0].shade


def test_timeline_cli_writes_png(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(small_trace()))
    out = tmp_path / "fig" / "timeline.png"
    run = subprocess.run([sys.executable, str(SCRIPTS / "plot_timeline.py"), str(trace),
                          "--out", str(out), "--title", "tiny"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_timeline_handles_16_ranks_by_1000_actions(tmp_path):
    # How long it takes is benchmarks' business (no timing here); that it draws at all is this.
    out = tmp_path / "big.png"
    plot_timeline.plot_timeline(big_trace(), out)
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert out.stat().st_size < 1_000_000


def test_timeline_rejects_trace_without_compute_events(tmp_path):
    trace = tmp_path / "empty.json"
    trace.write_text(json.dumps({"traceEvents": []}))
    # A trace with nothing to draw is bad input (the contract's exit 2).
    assert run("plot_timeline", plot_timeline.main, [str(trace), "--out",
                                                     str(tmp_path / "x.png")]) == 2
    assert not (tmp_path / "x.png").exists()


def bubble_rows() -> list[dict]:
    rows = []
    for cost in ("F=1,B=2", "F=1,I=1,W=1"):
        for d in (2, 4, 8):
            for n in (1, 2, 4, 8, 16):
                closed = (d - 1) / (d - 1 + n)
                rows.append(result_row("gpipe", d, n, closed, closed, cost=cost))
                rows.append(result_row("zb-h1", d, n, closed / 2, None, cost=cost)
                            if n >= d else result_row("zb-h1", d, n, 0, None, cost=cost,
                                                      status="invalid"))
    return rows


def test_bubble_groups_by_cost_and_device():
    groups = plot_bubble.group_rows(bubble_rows())
    assert sorted(groups) == [("F=1,B=2", 0.0), ("F=1,I=1,W=1", 0.0)]
    by_d = groups[("F=1,B=2", 0.0)]
    assert sorted(by_d) == [2, 4, 8]
    assert [r["microbatches"] for r in by_d[8]["zb-h1"]] == [8, 16]  # invalid rows dropped


def test_bubble_cli_writes_one_figure_per_cost(tmp_path):
    results = write_jsonl(tmp_path / "r.jsonl", bubble_rows())
    run = subprocess.run([sys.executable, str(SCRIPTS / "plot_bubble.py"), str(results),
                          "--out-dir", str(tmp_path / "plots")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == ["bubble_F1_B2.png", "bubble_F1_I1_W1.png"]
    for name in names:
        assert (tmp_path / "plots" / name).read_bytes()[:8] == PNG_MAGIC


def test_bubble_title_states_the_definition_and_costs():
    assert plot_bubble.cost_title("F=1,B=2", 0.0) == "F=1, B=2"
    assert "Σ idle / (ranks × makespan)" in plot_bubble.DEFINITION


def test_bubble_fails_without_ok_rows(tmp_path):
    results = write_jsonl(tmp_path / "r.jsonl",
                          [result_row("1f1b", 4, 2, 0, None, status="invalid")])
    # Records with nothing to draw are bad input (the contract's exit 2), and no folder is made.
    assert run("plot_bubble", plot_bubble.main, [str(results), "--out-dir",
                                                 str(tmp_path / "p")]) == 2
    assert not (tmp_path / "p").exists()


# --- measured traces and plot_memory ---------------------------------------------------------

import plot_memory  # noqa: E402
from conftest import run_row  # noqa: E402


def measured_trace() -> dict:
    trace = small_trace()
    trace["otherData"] = {"time_unit": "s", "cpu": "EPYC 9999", "cpu_cores": 2, "host": "vm",
                          "source": "cpu"}
    return trace


def spy_on_figures(monkeypatch) -> dict:
    """What each figure plot_timeline saves shows: its axis label, title, row names, legend."""
    seen: dict = {}
    real_savefig = Figure.savefig

    def spy(fig, *args, **kwargs):
        ax = fig.axes[0]
        seen.update(xlabel=ax.get_xlabel(), title=ax.get_title(),
                    rows=[t.get_text() for t in ax.get_yticklabels()],
                    legend=[t.get_text() for t in fig.legends[0].get_texts()])
        return real_savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return seen


def test_measured_trace_is_drawn_in_ms_and_names_the_machine(tmp_path, monkeypatch):
    seen = spy_on_figures(monkeypatch)
    out = tmp_path / "m.png"
    plot_timeline.plot_timeline(measured_trace(), out, label="transformer 1f1b D=2 N=2")
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert seen["xlabel"] == "time (ms)"
    assert seen["title"].startswith("transformer 1f1b D=2 N=2, measured on EPYC 9999 (2 cores)")
    assert "makespan 8 ms" in seen["title"]  # 8000 us in the trace
    plot_timeline.plot_timeline(small_trace(), tmp_path / "s.png")
    assert seen["xlabel"] == "time (cost units)" and "measured" not in seen["title"]


def data_parallel_trace() -> dict:
    """Two replicas of a 2-rank pipeline across 4 processes: each process's last action ends at
    5 ms, then its all-reduce (the last one ends at 9 ms) and its update (to 9.5 ms)."""
    trace = measured_trace()
    trace["otherData"].update(schedule="1f1b", devices=2, microbatches=2, replicas=2,
                              processes=4)
    events = []
    for w in range(4):
        events.append(event(f"F{w % 2}.0", "F", w, 0.0 + w % 2, 2, w % 2, 0))
        events.append(event(f"B{w % 2}.0", "B", w, 3.0 - w % 2, 2, w % 2, 0))
        events.append({"name": "allreduce", "cat": "allreduce", "ph": "X", "pid": 2, "tid": w,
                       "ts": 5000, "dur": 3000 + 1000 * (w == 3), "args": {"stage": -1}})
        events.append({"name": f"update {w % 2}", "cat": "update", "ph": "X", "pid": 3,
                       "tid": w, "ts": 9000, "dur": 500 * (w == 3), "args": {"stage": w % 2}})
    trace["traceEvents"] = events
    return trace


def test_a_data_parallel_step_is_drawn_to_its_last_all_reduce_and_update(tmp_path, monkeypatch):
    seen = spy_on_figures(monkeypatch)
    out = tmp_path / "dp.png"
    plot_timeline.plot_timeline(data_parallel_trace(), out)
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert seen["title"].startswith("1f1b D=2 N=2 R=2, measured on EPYC 9999")
    assert "makespan 9.5 ms" in seen["title"]  # the last update's end, not the last action's
    assert seen["rows"] == ["replica 0 rank 0", "replica 0 rank 1", "replica 1 rank 0",
                            "replica 1 rank 1"]
    assert "all-reduce" in seen["legend"] and "optimizer update" in seen["legend"]
    # One replica: plain rank rows, no R in the title.
    plot_timeline.plot_timeline(measured_trace(), tmp_path / "m.png")
    assert seen["rows"] == ["rank 0", "rank 1"]
    assert "all-reduce" not in seen["legend"]


def memory_rows() -> list[dict]:
    rows = [run_row(s, 4, 8, 0.3 + 0.01 * i, 0.28, closed=0.27,
                    measured_bytes=[float(k + i) * 2**20 for k in range(4)])
            for i, s in enumerate(["gpipe", "1f1b", "zb-h1", "dualpipev"])]
    rows.append(run_row("1f1b", 2, 8, 0.1, 0.12, workload="mlp"))
    rows.append(run_row("zb-h2", 4, 8, 0, 0, status="invalid"))
    rows.append(run_row("1f1b", 4, 16, 0.2, 0.2))  # another N: not in the memory figure
    return rows


def test_memory_rows_pick_the_schedules_at_one_point_in_order():
    chosen = plot_memory.memory_rows(memory_rows(), "transformer", 4, 8,
                                     ["dualpipev", "zb-h2", "gpipe", "1f1b"])
    assert [r["schedule"] for r in chosen] == ["dualpipev", "gpipe", "1f1b"]
    assert all(r["microbatches"] == 8 for r in chosen)
    ranks, measured, model = plot_memory.per_rank_bytes(chosen[0])
    assert ranks == [0, 1, 2, 3] and measured == model and measured[3] == 6 * 2**20


def test_memory_rows_never_mix_configurations():
    rows = memory_rows()
    # A later mpirun run of one schedule at the same point: another configuration, with fewer
    # of the schedules, so the figure keeps the threads' rows whole.
    mpi = run_row("1f1b", 4, 8, 0.3, 0.28, measured_bytes=[9.0 * 2**20] * 4)
    mpi["point"]["launcher"] = "mpirun"
    chosen = plot_memory.memory_rows(rows + [mpi], "transformer", 4, 8, ["gpipe", "1f1b"])
    assert [r["point"].get("launcher") for r in chosen] == [None, None]
    # Every schedule again with --recompute, later: as many schedules, so the later set, whole.
    again = []
    for s in ["gpipe", "1f1b"]:
        r = run_row(s, 4, 8, 0.3, 0.28)
        r["point"]["recompute"] = True
        again.append(r)
    chosen = plot_memory.memory_rows(rows + again, "transformer", 4, 8, ["gpipe", "1f1b"])
    assert [r["point"]["recompute"] for r in chosen] == [True, True]


def test_bubble_points_group_by_workload_and_skip_failed_rows():
    points = plot_memory.bubble_points(memory_rows())
    assert sorted(points) == ["mlp", "transformer"]
    assert len(points["transformer"]) == 5 and points["mlp"] == [(0.12, 0.1)]


def test_bubble_points_keep_each_placement_apart():
    # The same point in processes under mpirun and on a GPU: two more series, not one.
    mpi = run_row("1f1b", 2, 8, 0.2, 0.15, workload="mlp")
    mpi["point"].update(launcher="mpirun", replicas=2)
    gpu = run_row("1f1b", 2, 8, 0.3, 0.25, workload="mlp")
    gpu["point"].update(backend="cuda", virtual_devices=True)
    gpu["backend"] = "cuda"
    points = plot_memory.bubble_points(memory_rows() + [mpi, gpu])
    assert points["mlp"] == [(0.12, 0.1)]
    assert points["mlp, 4 processes under mpirun (2 replicas)"] == [(0.15, 0.2)]
    assert points["mlp, cuda, 2 virtual devices on one GPU"] == [(0.25, 0.3)]


def test_plot_memory_cli_writes_both_figures(tmp_path):
    results = write_jsonl(tmp_path / "cpu.jsonl", memory_rows())
    run = subprocess.run([sys.executable, str(SCRIPTS / "plot_memory.py"), str(results),
                          "--out-dir", str(tmp_path / "p"), "--workload", "transformer",
                          "--devices", "4", "--microbatches", "8",
                          "--schedules", "gpipe,1f1b,zb-h1,zb-h2,dualpipev"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "no ok rows for zb-h2" in run.stdout
    names = sorted(p.name for p in (tmp_path / "p").iterdir())
    assert names == ["bubble_measured_vs_predicted.png", "memory_transformer_D4_N8.png"]
    for name in names:
        assert (tmp_path / "p" / name).read_bytes()[:8] == PNG_MAGIC


def test_plot_memory_fails_without_matching_rows(tmp_path):
    results = write_jsonl(tmp_path / "cpu.jsonl", [run_row("1f1b", 4, 2, 0, 0,
                                                           status="invalid")])
    # Neither figure to draw: bad input (the contract's exit 2); one of the two would be 1.
    assert run("plot_memory", plot_memory.main, [str(results), "--out-dir",
                                                 str(tmp_path / "p")]) == 2
    assert not (tmp_path / "p").exists()


# --- schedule order from the registry ---------------------------------------------------------

import results_io  # noqa: E402


def legend_labels(monkeypatch, draw) -> list[str]:
    seen: list[str] = []
    real = Figure.legend

    def spy(fig, *args, handles=None, **kwargs):
        seen.extend(h.get_label() for h in handles or [])
        return real(fig, *args, handles=handles, **kwargs)

    monkeypatch.setattr(Figure, "legend", spy)
    draw()
    return [label for label in seen if not label.startswith(("markers", "lines"))]


def test_bubble_series_follow_the_registry_else_the_data(tmp_path, monkeypatch, fake_ppbench):
    data = [r for r in bubble_rows() if r.get("cost") == "F=1,B=2" or
            (r.get("point") or {}).get("cost") == "F=1,B=2"]
    data = [r for r in data if r.get("schedule") == "zb-h1"] + \
        [r for r in data if r.get("schedule") != "zb-h1"]  # zb-h1 named first
    registry = results_io.schedule_registry(fake_ppbench[0])
    assert legend_labels(monkeypatch, lambda: plot_bubble.plot_bubble(
        data, tmp_path / "a", registry=registry)) == ["gpipe", "zb-h1"]
    assert legend_labels(monkeypatch, lambda: plot_bubble.plot_bubble(
        data, tmp_path / "b")) == ["zb-h1", "gpipe"]
    # and on the command line
    results = write_jsonl(tmp_path / "r.jsonl", data)
    assert plot_bubble.main([str(results), "--out-dir", str(tmp_path / "c"), "--ppbench",
                             fake_ppbench[0]]) == 0
    assert run("plot_bubble", plot_bubble.main, [str(results), "--out-dir", str(tmp_path / "d"),
                                                 "--ppbench", str(tmp_path / "absent")]) == 2


def test_memory_figure_without_schedules_draws_every_schedule_of_the_data(tmp_path, monkeypatch,
                                                                          fake_ppbench):
    drawn = {}
    real = plot_memory.plot_memory

    def spy(rows, out, workload, devices, microbatches, schedules, dpi=110):
        drawn["schedules"] = list(schedules)
        return real(rows, out, workload, devices, microbatches, schedules, dpi)

    monkeypatch.setattr(plot_memory, "plot_memory", spy)
    results = write_jsonl(tmp_path / "cpu.jsonl", memory_rows())
    assert plot_memory.main([str(results), "--out-dir", str(tmp_path / "p"), "--ppbench",
                             fake_ppbench[0]]) == 0
    assert drawn["schedules"] == ["gpipe", "1f1b", "zb-h1", "dualpipev"]  # registry order
    assert plot_memory.main([str(results), "--out-dir", str(tmp_path / "q")]) == 0
    assert drawn["schedules"] == ["gpipe", "1f1b", "zb-h1", "dualpipev"]  # data order


def test_a_series_keeps_one_label_and_colour_whatever_group_size_was_resolved(tmp_path,
                                                                              monkeypatch):
    # A record holds the group size the generator resolved (D by default): labelled by it, one
    # interleaved-1f1b series split into one per D, each in its own colour.
    from conftest import result_row as row
    data = [row("interleaved-1f1b", d, n, 0.2, 0.2, chunks=2, group_size=d)
            for d in (2, 4) for n in (4, 8)]
    groups = plot_bubble.group_rows(data)
    assert {label for by_d in groups.values() for series in by_d.values()
            for label in series} == {"interleaved-1f1b v=2"}
    assert legend_labels(monkeypatch, lambda: plot_bubble.plot_bubble(
        data, tmp_path)) == ["interleaved-1f1b v=2"]
