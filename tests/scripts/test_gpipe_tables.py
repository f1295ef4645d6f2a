"""scripts/gpipe_tables_data.py (GPipe Tables 2 and 3: partition, normalisation, table rows) and
the report's GPipe sections (scripts/report_tables.py, through scripts/report.py), on fake data:
nothing here runs ppbench or measures."""

from __future__ import annotations

import pytest

import gpipe_tables_data as g
import report
from test_report import rows


def test_balanced_partition_minimises_the_largest_stage_and_fills_later_stages():
    assert g.balanced_partition([1, 1, 1, 1], 2) == [2, 2]
    # Optimum 9 ([1,2,3] [4,5] [6]); later stages take as many layers as it allows.
    assert g.balanced_partition([1, 2, 3, 4, 5, 6], 3) == [3, 2, 1]
    # A heavy first layer stands alone.
    assert g.balanced_partition([5, 1, 1, 1, 1], 2) == [1, 4]
    # Ties: the later stage takes the extra layer.
    assert g.balanced_partition([1] * 5, 2) == [2, 3]
    assert g.balanced_partition([3, 1], 2) == [1, 1]


def test_balanced_partition_refuses_more_stages_than_layers():
    with pytest.raises(ValueError, match="3 layers into 4 stages"):
        g.balanced_partition([1, 1, 1], 4)


def test_stage_sums_add_each_stages_layers():
    layers = [{"F": 1, "B": 2, "optimizer": 0.5}, {"F": 3, "B": 4, "optimizer": 0.25},
              {"F": 5, "B": 6}]  # the last profiled without an optimizer step
    assert g.stage_sums(layers, [2, 1]) == [{"F": 4, "B": 6, "optimizer": 0.75},
                                            {"F": 5, "B": 6, "optimizer": 0.0}]


def test_expand_layers_maps_by_signature_and_names_a_missing_one():
    profiled = {"emb": {"F": 1, "B": 2}, "layer": {"F": 3, "B": 6}}
    full = g.expand_layers(["emb", "layer", "layer", "layer"], profiled)
    assert [x["F"] for x in full] == [1, 3, 3, 3]
    full[1]["F"] = 99  # copies, not the profiled entries
    assert profiled["layer"]["F"] == 3
    with pytest.raises(KeyError, match="layer 1"):
        g.expand_layers(["emb", "head"], profiled)


def test_normalise_divides_by_the_base_cell():
    assert g.normalise({(2, 1): 4.0, (4, 1): 6.0}, (2, 1)) == {(2, 1): 1.0, (4, 1): 1.5}
    with pytest.raises(ValueError):
        g.normalise({(2, 1): 0.0}, (2, 1))


def fake_throughput(scale: float = 1.0) -> dict:
    # K x M / (M + K - 1): GPipe's step with uniform stages, one device per stage.
    return {(k, m): scale * k * m / (m + k - 1) for k in g.KS for m in g.MS}


def test_table2_rows_sets_paper_beside_normalised_prediction():
    rows_ = g.table2_rows("Transformer-48", fake_throughput(7.0))
    assert [r["M"] for r in rows_] == [1, 4, 32]
    m1, m4, m32 = rows_
    assert m1["cells"]["2"] == {"paper": 1.0, "predicted": 1.0, "measured": None, "cuda": None}
    assert m32["cells"]["8"]["paper"] == 6.3
    # 8*32/39 over 2*1/2, independent of the scale.
    assert m32["cells"]["8"]["predicted"] == pytest.approx(8 * 32 / 39)
    assert m4["cells"]["4"]["predicted"] == pytest.approx(16 / 7)


def test_table2_rows_normalise_measured_by_its_own_base():
    measured = {(2, 1): 2.0, (2, 4): 3.0, (2, 32): 3.6}
    rows_ = g.table2_rows("AmoebaNet-D (18, 256)", fake_throughput(), measured)
    assert [r["cells"]["2"]["measured"] for r in rows_] == pytest.approx([1.0, 1.5, 1.8])
    assert rows_[0]["cells"]["4"]["measured"] is None


def test_table3_row_normalises_to_k2():
    row = g.table3_row("Transformer-24", {2: 10.0, 4: 18.0, 8: 30.0})
    assert row["cells"]["4"] == {"paper": 1.8, "predicted": pytest.approx(1.8)}
    assert row["cells"]["8"]["predicted"] == pytest.approx(3.0)


def test_trends_of_the_paper_and_a_flat_prediction():
    flat = {(k, m): 1.0 for k in g.KS for m in g.MS}
    rows_ = g.table2_rows("Transformer-48", flat)
    paper = g.trends(rows_, "paper")
    assert paper["rises_with_K_at_M32"] and paper["rises_with_M_at_K8"]
    assert paper["K8_over_K2_at_M32"] == pytest.approx(6.3 / 1.8)
    pred = g.trends(rows_, "predicted")
    assert not pred["rises_with_K_at_M32"] and pred["K8_over_K2_at_M32"] == 1.0


def test_scaling_series_ideal_is_linear_from_the_first_point():
    s = g.scaling_series([2, 1], {1: 10.0, 2: 15.0})
    assert s == {"devices": [1, 2], "throughput": [10.0, 15.0], "ideal": [10.0, 20.0]}


def test_median_layers_takes_each_layers_median_over_the_repeats():
    repeats = [{"a": {"name": "emb", "F": f, "B": 2 * f, "optimizer": 3 * f},
                "b": {"name": "cell", "F": 10 * f, "B": 1.0}}
               for f in (1.0, 5.0, 2.0)]
    assert g.median_layers(repeats) == {"a": {"name": "emb", "F": 2.0, "B": 4.0, "optimizer": 6.0},
                                        "b": {"name": "cell", "F": 20.0, "B": 1.0,
                                              "optimizer": 0.0}}
    with pytest.raises(ValueError, match="profile 1 times other layers"):
        g.median_layers([{"a": repeats[0]["a"]}, {"b": repeats[0]["b"]}])
    with pytest.raises(ValueError, match="no profile"):
        g.median_layers([])


def test_pooled_step_time_is_the_median_of_every_measured_step():
    # one slow run and one slow step move it by a place, not by their size
    assert g.pooled_step_time([[1.0, 1.1, 9.0], [1.2, 1.3, 1.0], [5.0, 6.0, 7.0]]) == 1.3
    assert g.pooled_step_time([[2.0]]) == 2.0
    for bad in ([], [[]], [[1.0, 0.0]], [[float("nan")]]):
        with pytest.raises(ValueError):
            g.pooled_step_time(bad)


def fake_table() -> dict:
    prov = {"host": "box", "cpu": "EPYC", "cpu_cores": 2, "git_commit": "abcdef1234567890"}
    run = {"load_average_before": [2.5, 2, 2], "provenance": prov}
    return {
        "source": "GPipe", "definition": "normalised", "machine": prov,
        "data": {"profiles": {"T": {"load_average_before": [1.5, 1, 1]}},
                 "runs": {"small": [run]}, "scaling_runs": [run]},
        "table2": [{"model": "Transformer-48", "flags": "--preset gpipe-transformer",
                    "rows": g.table2_rows("Transformer-48", fake_throughput())}],
        "table3": [{**g.table3_row("Transformer-24", {2: 1.0, 4: 2.0, 8: 4.0})}],
        "small": [{"model": "Transformer-8", "of": "Transformer-48",
                   "rows": [{"M": m, "predicted": 1.0 + i, "measured": 1.1 + i, "cuda": None}
                            for i, m in enumerate(g.MS)]}],
        "scaling": {"model": "Transformer-8", "microbatches": 8, "microbatch_size": 1,
                    "measured": g.scaling_series([1, 2], {1: 10.0, 2: 18.0}),
                    "predicted": g.scaling_series([1, 2, 4], {1: 11.0, 2: 20.0, 4: 36.0})},
        "discussion": "Trend words.",
    }


def fake_gpu() -> dict:
    return {"source": ["results/gpu/h/tables/gpu_tables.jsonl"],
            "machine": {"gpu": "NVIDIA H100 80GB HBM3", "git_commit": "fedcba9876543210",
                        "date": "2026-11-25T00:00:00Z", "host": "gpu"},
            "sms_per_device": 16,
            "grids": [{"model": "Transformer-8", "of": "Transformer-48",
                       "rows": [{"M": m, "cells": {"2": 1.0 * (i + 1), "4": 1.5 * (i + 1),
                                                   "8": 2.0 * (i + 1)}}
                                for i, m in enumerate(g.MS)]}],
            "scaling": g.scaling_series([1, 2, 4, 8], {1: 100.0, 2: 190.0, 4: 350.0, 8: 600.0})}


def gpu_row(schedule: str, model: str, d: int, n: int, sps: float, status: str = "ok",
            flags: str | None = None, gpu: str = "NVIDIA H200", sms: int = 16,
            date: str = "2026-11-25") -> dict:
    import gpipe_tables as t
    return {"throughput": {"samples_per_s": sps},
            "gpu": {"gpu_names": [gpu]},
            "provenance": {"git_commit": f"commit-{date}", "date": date, "host": "g"},
            "gpu_table": {"label": f"{schedule}/{model}/D{d}/N{n}", "model": model,
                          "schedule": schedule, "devices": d, "microbatches": n,
                          "flags": flags if flags is not None else " ".join(t.SMALL[model]),
                          "sms_per_device": sms, "status": status}}


def write_sessions(root, sessions: dict) -> str:
    """Each session's rows in ROOT/NAME/tables/gpu_tables.jsonl; the glob of them all."""
    import json
    for name, rs in sessions.items():
        d = root / name / "tables"
        d.mkdir(parents=True)
        (d / "gpu_tables.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    return str(root / "*" / "tables" / "gpu_tables.jsonl")


def full_session(**how) -> list[dict]:
    import gpipe_tables as t
    tf = list(t.SMALL)[1]
    rows = [gpu_row("gpipe", tf, k, m, 10.0 * k * m / (m + k - 1), **how)
            for k in g.KS for m in g.MS]
    return rows + [gpu_row("1f1b", t.SCALING_MODEL, d, t.SCALING_N, 100.0 * d, **how)
                   for d in (1, 2, 4, 8)]


def test_gpu_rows_of_gpu_tables_fill_the_grid_and_the_scaling(tmp_path):
    import gpipe_tables as t
    amoeba, tf = list(t.SMALL)
    first = full_session()
    first.append(gpu_row("gpipe", amoeba, 2, 1, 5.0, status="error"))  # not ok: left out
    first.append(gpu_row("gpipe", amoeba, 4, 1, 5.0, flags="--workload amoebanet"))  # other shape
    first.append(gpu_row("gpipe", tf, 8, 32, 99.0))  # the point run again: the later row stands
    rows_ = t.gpu_rows(write_sessions(tmp_path, {"a": first}))
    sec = t.gpu_section(rows_)
    assert sec["machine"]["gpu"] == "NVIDIA H200" and sec["sms_per_device"] == 16
    assert sec["not_used"] == []
    assert [x["model"] for x in sec["grids"]] == [tf]  # the AmoebaNet rows are not a grid
    cells = {r["M"]: r["cells"] for r in sec["grids"][0]["rows"]}
    assert cells[1]["2"] == 1.0
    assert cells[32]["4"] == pytest.approx(4 * 32 / 35)
    assert cells[32]["8"] == pytest.approx(99.0 / 10.0)
    assert sec["scaling"]["devices"] == [1, 2, 4, 8]
    assert sec["scaling"]["throughput"] == [100.0, 200.0, 400.0, 800.0]
    assert t.gpu_section([]) is None
    words = t.discussion([], [], sec)
    assert (f"{tf} on one GPU, K devices of 16 SMs: throughput rises with K at M = 32 yes, with M "
            "at K = 8 yes; K = 8 over K = 2 at M = 32: 5.10x.") in words  # 99 / (640 / 33)


def test_gpu_cells_of_two_sessions_are_never_normalised_against_each_other(tmp_path):
    # Another session (an H100 in devices of 8 SMs, later) ran only the base point, in a file
    # named after the first: its cell used to replace the first session's base, and the grid
    # divided one GPU's throughput by the other's under the first one's name.
    import gpipe_tables as t
    tf = list(t.SMALL)[1]
    later = [gpu_row("gpipe", tf, 2, 1, 1.0, gpu="NVIDIA H100", sms=8, date="2026-11-27")]
    pattern = write_sessions(tmp_path, {"a-h200": full_session(), "b-h100": later})
    sec = t.gpu_section(t.gpu_rows(pattern))
    cells = {r["M"]: r["cells"] for r in sec["grids"][0]["rows"]}
    assert cells[32]["8"] == pytest.approx((10.0 * 8 * 32 / 39) / 10.0)  # the H200's own base
    assert sec["machine"] == {"gpu": "NVIDIA H200", "git_commit": "commit-2026-11-25",
                              "date": "2026-11-25", "host": "g"}
    assert sec["source"] == [str(tmp_path / "a-h200" / "tables" / "gpu_tables.jsonl")]
    assert sec["not_used"] == [{"source": str(tmp_path / "b-h100" / "tables" / "gpu_tables.jsonl"),
                                "gpu": "NVIDIA H100", "sms_per_device": 8, "date": "2026-11-27",
                                "points": 1}]
    # Of sessions with as many points, the latest by its recorded date, whatever its file name.
    pattern = write_sessions(tmp_path / "two", {
        "a-new": full_session(sms=8, date="2026-11-28"),
        "b-old": full_session(date="2026-11-20")})
    sec = t.gpu_section(t.gpu_rows(pattern))
    assert sec["sms_per_device"] == 8 and sec["machine"]["date"] == "2026-11-28"
    assert [o["date"] for o in sec["not_used"]] == ["2026-11-20"]


def test_the_report_names_the_gpu_sessions_it_left_out():
    table = fake_table()
    table["gpu"] = {**fake_gpu(), "not_used": [
        {"source": "results/gpu/old/tables/gpu_tables.jsonl", "gpu": "NVIDIA A100",
         "sms_per_device": 8, "date": "2026-11-20", "points": 3}]}
    text = report.build_report(rows(), "t.jsonl", gpipe_tables=table, gpipe_tables_source="g")
    assert ("Not used, as cells of different sessions are not normalised against each other: "
            "`results/gpu/old/tables/gpu_tables.jsonl` (NVIDIA A100, 8 SMs per device, "
            "2026-11-20, 3 points).") in section(text, "GPipe")


def test_a_gpu_row_without_a_positive_throughput_is_named(tmp_path):
    import gpipe_tables as t
    from script_cli import InputError
    tf = list(t.SMALL)[1]
    pattern = write_sessions(tmp_path, {"a": [gpu_row("gpipe", tf, 2, 1, 0.0)]})
    with pytest.raises(InputError, match="throughput.samples_per_s 0.0, not a positive number"):
        t.gpu_rows(pattern)


def section(text: str, title: str) -> str:
    start = text.index(f". {title}\n")
    end = text.find("\n## ", start)
    return text[start:] if end < 0 else text[start:end]


def test_report_gpipe_section_sets_paper_theory_simulation_and_measurement_side_by_side():
    text = report.build_report(rows(), "results/latest/theory.jsonl", gpipe_tables=fake_table(),
                               gpipe_tables_source="results/reference/gpipe_tables.json")
    gpipe = section(text, "GPipe")
    assert "1.1 Tables 2 and 3: normalised throughput" in gpipe  # the paper's table first
    assert "Source: GPipe, Tables 2 and 3; from `results/reference/gpipe_tables.json`" in gpipe
    assert "box (EPYC, 2 cores), commit abcdef123456" in gpipe
    assert "load average 1.5 to 2.5" in gpipe
    assert "Simulated by ppbench" not in gpipe  # an older table does not say which build
    # Table 2, M = 32: paper, theory (none), simulation (64/33, 128/35, 256/39 over the base 1)
    assert "| model | M | K | paper | theory | simulation | measurement |" in gpipe
    assert "| Transformer-48 | 32 | 2 | 1.80 | — | 1.94 | — |" in gpipe
    assert "| Transformer-48 | 32 | 8 | 6.30 | — | 6.56 | — |" in gpipe
    assert "| Transformer-24 | 4 | 1.80 | — | 2.00 | — |" in gpipe
    assert "| Transformer-8 | Transformer-48 | 4 | 1.70 | — | 2.00 | 2.10 | — |" in gpipe
    # why the theory and measurement cells are empty, and what differs, from the data
    assert "*theory* is —: the paper states no closed form for throughput" in gpipe
    assert "Table 3: simulation − paper from +0.00 to +0.70 over 3 cells, the largest at " \
           "Transformer-24, K = 8 (4.00 against 3.30)." in gpipe
    assert "Trend words." in gpipe
    assert "The CUDA column is empty: no GPU run of these shapes yet." in gpipe
    table = fake_table()
    table["small"][0]["rows"][1]["cuda"] = 1.5
    with_cuda = report.build_report(rows(), "t.jsonl", gpipe_tables=table, gpipe_tables_source="g")
    assert "| Transformer-8 | Transformer-48 | 4 | 1.70 | — | 2.00 | 2.10 | 1.50 |" in with_cuda
    assert "Real GPU runs" not in with_cuda  # a CUDA value without its GPU block: no grid
    table["gpu"] = fake_gpu()
    with_gpu = report.build_report(rows(), "t.jsonl", gpipe_tables=table, gpipe_tables_source="g")
    assert ("The CUDA column: NVIDIA H100 80GB HBM3 split into devices of 16 SMs, commit "
            "fedcba987654, 2026-11-25T00:00:00Z (`results/gpu/h/tables/gpu_tables.jsonl`)"
            in with_gpu)
    paper = {(k, m): g.TABLE2["Transformer-48"][(k, m)] for k in g.KS for m in g.MS}
    assert (f"| Transformer-8 | Transformer-48 | 32 | {paper[(2, 32)]:.2f} | 3.00 | "
            f"{paper[(4, 32)]:.2f} | 4.50 | {paper[(8, 32)]:.2f} | 6.00 |") in with_gpu
    gpu_scaling = section(with_gpu, "PipeDream-Flush / 1F1B (DAPPLE)")
    assert "| 8 | 600.00 | 800.00 |" in gpu_scaling
    assert "on the GPU D = 1: 1.00, D = 2: 0.95, D = 4: 0.88, D = 8: 0.75" in gpu_scaling
    # 1F1B's throughput against devices is under the 1F1B paper, with its measuring machine
    one = section(text, "PipeDream-Flush / 1F1B (DAPPLE)")
    assert "Throughput against pipeline devices" in one
    assert "| 2 | 18.00 | 20.00 | 20.00 | 22.00 |" in one
    assert "| 4 | — | — | 36.00 | 44.00 |" in one
    assert "Measurement column: box (EPYC, 2 cores), commit abcdef123456" in one
    assert "No measurement at D = 4: the CPU has 2 cores" in one
    # how the layers and the runs were timed: an older record's one profile and one run a point
    assert "each layer's F and B measured once on the CPU" in gpipe
    assert "normalised to their own M = 1 run; each point one run's mean step time)" in gpipe
    assert "(the machine was shared); each point one run's mean step time." in one


def test_the_report_names_the_build_that_simulated():
    # --reuse remakes the predictions with today's ppbench from measurements of another commit.
    table = fake_table()
    table["predicted_by"] = {"git_commit": "0123456789abcdef", "ppbench_version": "0.1.0",
                             "date": "2026-11-29T00:00:00Z"}
    gpipe = section(report.build_report(rows(), "t.jsonl", gpipe_tables=table,
                                        gpipe_tables_source="g"), "GPipe")
    assert "box (EPYC, 2 cores), commit abcdef123456" in gpipe
    assert "Simulated by ppbench at commit 0123456789ab." in gpipe


def test_simulator_provenance_is_the_simulating_builds(monkeypatch):
    import gpipe_tables as t
    seen = []

    def fake_json(ppbench, args):
        seen.append(args)
        return {"provenance": {"git_commit": "c0ffee", "ppbench_version": "9", "date": "d",
                               "host": "h"}}
    monkeypatch.setattr(t, "ppbench_json", fake_json)
    assert t.simulator_provenance("pp") == {"git_commit": "c0ffee", "ppbench_version": "9",
                                            "date": "d"}
    assert seen[0][0] == "simulate"


def test_report_says_how_many_profiles_and_steps_each_figure_is_the_median_of():
    table = fake_table()
    data = table["data"]
    data["profiles"] = {"A": {"load_average_before": [1.5, 1, 1], "repeats": 3},
                        "B": {"load_average_before": [1.0, 1, 1], "repeats": 5}}
    run = {"load_average_before": [2.5, 2, 2], "provenance": table["machine"], "repeats": 5,
           "step_times_s": [[0.1] * 5] * 5}
    data["runs"], data["scaling_runs"] = {"small": [run]}, [run]
    text = report.build_report(rows(), "t.jsonl", gpipe_tables=table, gpipe_tables_source="g")
    gpipe, one = section(text, "GPipe"), section(text, "PipeDream-Flush / 1F1B (DAPPLE)")
    assert ("each layer's F and B the median of 3 to 5 profiles (each one step after a warm-up "
            "step) on the CPU") in gpipe
    told = "each point the median of 25 measured steps (5 runs of 5, in rounds over the points)"
    assert f"normalised to their own M = 1 run; {told})" in gpipe
    assert f"(the machine was shared); {told}." in one


def test_report_has_no_gpipe_tables_without_the_file():
    text = report.build_report(rows(), "results/latest/theory.jsonl")
    assert "Tables 2 and 3" not in text and "Throughput against pipeline devices" not in text


def test_measure_points_runs_rounds_over_the_points_and_takes_the_pooled_median(monkeypatch):
    import gpipe_tables as t
    calls = []

    def fake_run(ppbench, args):
        n = int(args[args.index("-n") + 1])
        calls.append(n)
        # the third round is a slow spell: every point's steps take 3x as long in it
        slow = 3.0 if len(calls) in (7, 8, 9) else 1.0
        steps = int(args[args.index("--steps") + 1])
        return {"step_times_s": [slow * n * 0.01] * steps, "provenance": {"host": "box"}}

    monkeypatch.setattr(t, "ppbench_json", fake_run)
    out = t.measure_points("ppbench", ["--workload", "mlp"], "gpipe", [(2, 1), (2, 4), (2, 32)])
    assert calls == [1, 4, 32] * t.RUN_REPEATS  # rounds, not one point's runs back to back
    assert [(r["K"], r["M"]) for r in out] == [(2, 1), (2, 4), (2, 32)]
    for r in out:
        assert r["repeats"] == t.RUN_REPEATS and len(r["step_times_s"]) == t.RUN_REPEATS
        assert all(len(s) == t.RUN_STEPS for s in r["step_times_s"])
        assert r["step_time_s"] == pytest.approx(r["M"] * 0.01)  # the slow round left out
        assert r["samples_per_s"] == pytest.approx(r["M"] / r["step_time_s"])
        assert f"--steps {t.RUN_STEPS} --warmup {t.RUN_WARMUP}" in r["command"]
        assert r["provenance"] == {"host": "box"} and len(r["load_average_before"]) == 3


def test_profile_layers_takes_each_layers_median_over_warm_profiles(monkeypatch):
    import json
    import gpipe_tables as t
    spec = {"layers": [{"name": n, "kind": k, "params": 1, "flops": 2, "activation_bytes": 3,
                        "boundary": 4} for n, k in (("emb", "embedding"), ("l0", "layer"))]}
    monkeypatch.setattr(t, "model_spec", lambda ppbench, flags: spec)
    seen = []

    def fake_run(ppbench, args):
        seen.append(args)
        scale = [1.0, 4.0, 2.0][len(seen) - 1]
        out = args[args.index("--profile-out") + 1]
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"stages": [{"F": scale, "B": 2 * scale, "optimizer": 0.1 * scale},
                                  {"F": 10 * scale, "B": 0.5}]}, f)
        return {"provenance": {"host": "box"}}

    monkeypatch.setattr(t, "ppbench_json", fake_run)
    p = t.profile_layers("ppbench", ["--workload", "transformer"], 2, 3)
    assert len(seen) == 3 and all(a[a.index("--warmup") + 1] == str(t.PROFILE_WARMUP)
                                  for a in seen)
    assert p["repeats"] == 3 and p["repeat_totals_s"] == [13.5, 52.5, 26.5]
    assert sorted((v["name"], v["F"], v["B"], v["optimizer"]) for v in p["layers"].values()) == [
        ("emb", 2.0, 4.0, 0.2), ("l0", 20.0, 0.5, 0.0)]


def test_a_failing_simulation_leaves_out_as_it_was_and_keeps_the_measurements(
        tmp_path, monkeypatch, capsys):
    # It wrote {"data": ...} over --out (the committed table) before simulating: a failure there
    # left a table without its tables, and `make report` failed on it.
    import json
    import gpipe_tables as t
    from script_cli import run
    out, kept = tmp_path / "g.json", tmp_path / "g.data.json"
    out.write_text('{"old": true}\n')
    data = {"profiles": {}, "runs": {}, "scaling_runs": []}
    monkeypatch.setattr(t, "measure", lambda ppbench: data)

    def fail(ppbench, data, gpu):
        raise KeyError("layer 3")

    monkeypatch.setattr(t, "build", fail)
    args = ["--out", str(out), "--plot", str(tmp_path / "g.png"), "--gpu-rows",
            str(tmp_path / "none")]
    assert run("gpipe_tables", t.main, args) == 1
    assert out.read_text() == '{"old": true}\n'
    assert json.loads(kept.read_text()) == {"data": data}
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "'layer 3'" in err[0] and f"redo with --reuse {kept}" in err[0]
    # Redone from what was kept: OUT written whole, the kept copy gone.
    monkeypatch.setattr(t, "build", lambda ppbench, data, gpu: {"data": data, "table2": []})
    monkeypatch.setattr(t, "plot", lambda table, path: None)
    assert run("gpipe_tables", t.main, ["--reuse", str(kept), *args]) == 0
    assert json.loads(out.read_text()) == {"data": data, "table2": []}
    assert not kept.exists()


def test_each_table_says_which_cell_it_is_normalised_by():
    # Table 3 has only M = 32: its base is K = 2 at M = 32, not the K = 2, M = 1 of Table 2.
    import gpipe_tables as t
    assert "Table 2: K = 2, M = 1; Table 3: K = 2, M = 32" in t.DEFINITION
    gpipe = section(report.build_report(rows(), "t.jsonl", gpipe_tables=fake_table(),
                                        gpipe_tables_source="g"), "GPipe")
    assert "**Table 2** (TPU v3; each cell ÷ the model's K = 2, M = 1 cell):" in gpipe
    assert "**Table 3** (P100, M = 32; each cell ÷ the model's K = 2 cell):" in gpipe
