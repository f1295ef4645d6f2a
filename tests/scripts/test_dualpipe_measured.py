"""Tests of scripts/dualpipe_measured.py's pure parts and of the report subsection it feeds, on
fake `ppbench run` records (nothing is measured here)."""

from __future__ import annotations

import pytest

import dualpipe_measured as dm
import report_tables
from script_cli import run

COSTS = {"F": 1.0, "I": 1.0, "W": 0.5, "B": 1.5, "FB": 2.5}


def test_paper_bubble_is_the_papers_table() -> None:
    c = {"F": 1.0, "B": 2.0, "W": 0.5, "FB": 3.0}
    assert dm.paper_bubble("1F1B", 8, c) == 7 * 3.0
    assert dm.paper_bubble("ZB1P", 8, c) == 7 * (1 + 2 - 1.0)
    assert dm.paper_bubble("DualPipe", 8, c) == 3 * (3 + 2 - 1.5)
    assert dm.paper_bubble("DualPipeV", 8, c) == dm.paper_bubble("DualPipe", 8, c)
    # PP = 2: DualPipe's (PP/2-1) factor is zero
    assert dm.paper_bubble("DualPipe", 2, c) == 0
    with pytest.raises(ValueError, match="unknown method"):
        dm.paper_bubble("GPipe", 8, c)


def test_params_activation_and_devices() -> None:
    assert [dm.paper_params(m) for m, _ in dm.METHODS] == [1, 1, 2, 2]
    assert [dm.paper_activation(m, 4) for m, _ in dm.METHODS] == [4, 4, 5, 5]
    assert [dm.devices_for(s, 4) for _, s in dm.METHODS] == [4, 4, 4, 2]
    assert [dm.stages_for(s, 2) for _, s in dm.METHODS] == [2, 2, 2, 4]


def test_comparisons() -> None:
    title, points = dm.comparison_points("pp4")
    assert "PP = 4" in title
    assert points == [("1F1B", "1f1b", 4), ("ZB1P", "zb-h1", 4), ("DualPipe", "dualpipe", 4),
                      ("DualPipeV", "dualpipev", 2)]
    _, points = dm.comparison_points("d2")
    assert [d for _, _, d in points] == [2, 2, 2, 2]
    for bad in ("pp3", "d0", "x4", "pp", "dd2"):
        with pytest.raises(ValueError, match="bad comparison"):
            dm.comparison_points(bad)


def test_main_refuses_bad_input(capsys: pytest.CaptureFixture) -> None:
    # Refused by the parser (SystemExit 2, one line), before anything runs.
    for args, words in ((["--comparisons", "pp5"], "pp5"),
                        (["--repeats", "0"], "--repeats: 0 is out of range")):
        with pytest.raises(SystemExit) as refused:
            dm.main(args)
        assert refused.value.code == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and words in err, err


def test_main_passes_ppbench_refusals_on(tmp_path, capsys: pytest.CaptureFixture) -> None:
    refusing = tmp_path / "ppbench"
    refusing.write_text("#!/bin/sh\necho 'dualpipe needs an even --microbatches N >= 2D' >&2\n"
                        "exit 2\n")
    refusing.chmod(0o755)
    out = tmp_path / "out.json"
    assert run("dualpipe_measured", dm.main,
               ["--ppbench", str(refusing), "--out", str(out), "-n", "2"]) == 2
    assert "N >= 2D" in capsys.readouterr().err
    assert not out.exists()


def test_costs_and_activation_unit() -> None:
    profile = {"stages": [dict(COSTS), {**COSTS, "F": 3.0}]}
    assert dm.mean_costs(profile)["F"] == 2.0
    assert dm.median_costs([{"F": 1.0}, {"F": 5.0}, {"F": 2.0}]) == {"F": 2.0}
    with pytest.raises(ValueError, match="no stages"):
        dm.mean_costs({"stages": []})
    assert dm.stage_activation_bytes([10, 10, 20, 20, 5], [2, 3]) == [20, 45]
    with pytest.raises(ValueError, match="does not cover"):
        dm.stage_activation_bytes([10, 10, 20], [2, 2])
    # DualPipe on 2 ranks: rank 0 holds parts 0 and 1 (chain 1's second stage), rank 1 the same
    memory = {"ranks": [{"rank": 1, "parts": [1, 0]}, {"rank": 0, "parts": [0, 0]}]}
    assert dm.rank_units(memory, [20, 45]) == [20.0, 32.5]


def fake_record(idle: list[float], peaks: list[int], step: float = 0.1) -> dict:
    """A `ppbench run --format json` record with only the fields the script reads."""
    ranks = [{"rank": r, "idle": x, "peak_activations": 3} for r, x in enumerate(idle)]
    return {"step_time_s": step,
            "measured": {"makespan": 1.0, "bubble_fraction": 0.2, "ranks": ranks[::-1]},
            "predicted": {"ranks": [{"rank": r, "idle": x / 2} for r, x in enumerate(idle)]},
            "activation_bytes": [{"rank": r, "measured_peak_bytes": p} for r, p in
                                 enumerate(peaks)],
            "provenance": {"git_commit": "abc", "host": "h", "cpu": "c", "cpu_cores": 2,
                           "load_average": [1.0, 1.0, 1.0]}}


def memory(counts: list[int]) -> dict:
    return {"ranks": [{"rank": r, "param_count": c} for r, c in enumerate(counts)]}


def dualpipe_row() -> dict:
    records = [fake_record([0.3, 0.2], [500, 500]), fake_record([0.5, 0.1], [500, 600]),
               fake_record([0.4, 0.3], [500, 700])]
    profiles = [{"stages": [COSTS, COSTS]}] * 3
    return dm.summarize("DualPipe", "dualpipe", 4, records, profiles, memory([20, 20, 20, 20]),
                        memory([10, 10, 10, 10]), [100.0, 120.0], cores=2)


def test_summarize() -> None:
    row = dualpipe_row()
    assert row["pp"] == 4 and row["oversubscribed"] and row["repeats"] == 3
    assert row["w_measured"] and row["fb_measured"]
    b = row["bubble"]
    # rank by rank, the median over the three runs, read from ranks listed out of order
    assert b["measured_idle_per_rank_s"] == [0.4, 0.2]
    assert b["measured_idle_max_per_run_s"] == [0.3, 0.5, 0.4]
    assert b["predicted_idle_per_rank_s"] == [0.2, 0.1]
    assert b["formula_s"] == pytest.approx(1 * (2.5 + 1.5 - 1.5))
    assert b["formula_in_F"] == pytest.approx(2.5)
    assert b["measured_idle_max_in_F"] == pytest.approx(0.4)
    assert row["params"]["relative_to_1f1b"] == 2.0
    a = row["activations"]
    assert a["measured_peak_bytes_per_rank"] == [500, 600]
    assert a["measured_peak_units_per_rank"] == [5.0, 5.0]
    assert a["paper_value"] == 5


def test_report_subsection() -> None:
    table = {"config": {"backend": "cpu", "workload": "--workload mlp",
                        "microbatches": 8, "steps": 3, "warmup": 1, "optimizer": "none",
                        "repeats": 3},
             "provenance": {"host": "h", "cpu": "c", "cpu_cores": 2, "git_commit": "abc",
                            "load_average_before": [1, 1, 1], "load_average_after": [2, 2, 2]},
             "comparisons": [{"title": "PP = 4 stages", "rows": [dualpipe_row()]}]}
    lines = report_tables.measured_dualpipe_section(table, "x.json")
    text = "\n".join(lines)
    assert lines[0].startswith("Source: ")
    assert "host h, CPU c (2 cores), ppbench built from commit abc" in text
    assert "#### PP = 4 stages" in text
    row = next(line for line in lines if line.startswith("| DualPipe | `dualpipe`"))
    assert "D=4 (oversubscribed)" in row
    assert "200–400 (max 0.40 F)" in row  # idle per rank in ms, min–max
    assert "`(PP/2-1)(F&B+B-3W)` = 2500 (2.50 F)" in row
    assert "2.00× (2x)" in row and "5.00; count 3 (PP+1 = 5)" in row
    assert "DualPipe 0.16× (runs 300–500 ms)" in text  # measured 0.4 s ÷ formula 2.5 s
    assert "| DualPipe | 4 | 1000 | 1500 | 500 | 2500 | 100 | 0.200 |" in text  # seconds in ms
    one_f_one_b = {**dualpipe_row(), "method": "1F1B", "w_measured": False,
                   "fb_measured": False}
    assert "| — (B not split) | — (no pairs) |" in report_tables.measured_costs_row(one_f_one_b)
    assert report_tables.measured_dualpipe_section(None, "x.json") == []
