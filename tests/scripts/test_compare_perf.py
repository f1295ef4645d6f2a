"""scripts/compare_perf.py on small synthetic Google Benchmark JSON files."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_perf.py"
CONTEXT = {"cpu_model": "Test CPU 9000", "num_cpus": 2, "ppbench_build_type": "release"}


def bench(name, rate=None, real_time=10.0, unit="ms", error=None):
    """One iteration row as Google Benchmark writes it."""
    row = {"name": name, "run_name": name, "run_type": "iteration", "iterations": 1,
           "real_time": real_time, "cpu_time": real_time, "time_unit": unit}
    if rate is not None:
        row["actions_per_second"] = rate
    if error is not None:
        row.update(error_occurred=True, error_message=error, real_time=0.0)
    return row


def write(path, rows, context=CONTEXT):
    path.write_text(json.dumps({"context": context, "benchmarks": rows}))
    return path


def run(baseline, latest, *extra):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(baseline), str(latest), *extra],
                          capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout


def summary(out):
    return out.strip().splitlines()[-1]


def test_detects_rate_regression(tmp_path):
    base = write(tmp_path / "base.json", [bench("BM_Pipeline/1f1b/D64/N1024", rate=5e6),
                                          bench("BM_Pipeline/gpipe/D64/N1024", rate=5e6)])
    latest = write(tmp_path / "latest.json", [bench("BM_Pipeline/1f1b/D64/N1024", rate=4e6),
                                              bench("BM_Pipeline/gpipe/D64/N1024", rate=5e6)])
    rc, out = run(base, latest)
    assert rc == 1
    regressed = [line for line in out.splitlines() if "REGRESSION" in line]
    assert len(regressed) == 1 and "1f1b" in regressed[0]
    assert summary(out) == "perf: 2 compared, 1 regressions, 0 improvements (threshold 10%)"


def test_warn_only_exits_zero(tmp_path):
    base = write(tmp_path / "base.json", [bench("BM_a", rate=5e6)])
    latest = write(tmp_path / "latest.json", [bench("BM_a", rate=1e6)])
    rc, out = run(base, latest, "--warn-only")
    assert rc == 0
    assert "REGRESSION" in out


def test_noise_within_threshold_passes(tmp_path):
    base = write(tmp_path / "base.json", [bench("BM_a", rate=5.0e6), bench("BM_b", rate=5.0e6)])
    latest = write(tmp_path / "latest.json", [bench("BM_a", rate=4.7e6), bench("BM_b", rate=5.3e6)])
    rc, out = run(base, latest)
    assert rc == 0
    assert "REGRESSION" not in out
    assert summary(out) == "perf: 2 compared, 0 regressions, 0 improvements (threshold 10%)"


def test_threshold_option_and_improvement(tmp_path):
    base = write(tmp_path / "base.json", [bench("BM_a", rate=5e6), bench("BM_b", rate=5e6)])
    latest = write(tmp_path / "latest.json", [bench("BM_a", rate=4.7e6), bench("BM_b", rate=8e6)])
    rc, out = run(base, latest, "--threshold", "0.05")
    assert rc == 1
    assert summary(out) == "perf: 2 compared, 1 regressions, 1 improvements (threshold 5%)"


def test_real_time_used_without_counter_and_units_converted(tmp_path):
    # 10 ms -> 12000 us is 20% slower; 10 ms -> 10100 us is noise.
    base = write(tmp_path / "base.json", [bench("BM_slow", real_time=10.0, unit="ms"),
                                          bench("BM_same", real_time=10.0, unit="ms")])
    latest = write(tmp_path / "latest.json", [bench("BM_slow", real_time=12000.0, unit="us"),
                                              bench("BM_same", real_time=10100.0, unit="us")])
    rc, out = run(base, latest)
    assert rc == 1
    assert [line.split()[0] for line in out.splitlines() if "REGRESSION" in line] == ["BM_slow"]


def test_missing_baseline_exits_zero_with_hint(tmp_path):
    latest = write(tmp_path / "latest.json", [bench("BM_a", rate=5e6)])
    missing = tmp_path / "baseline.json"
    rc, out = run(missing, latest)
    assert rc == 0
    assert f"cp {latest} {missing}" in out


def test_unmatched_names_are_listed_not_compared(tmp_path):
    base = write(tmp_path / "base.json", [bench("BM_a", rate=5e6), bench("BM_gone", rate=5e6)])
    latest = write(tmp_path / "latest.json", [bench("BM_a", rate=5e6), bench("BM_new", rate=1.0)])
    rc, out = run(base, latest)
    assert rc == 0
    assert "BM_gone" in out and "missing from latest" in out
    assert "BM_new" in out and "new: not in baseline" in out
    assert summary(out) == "perf: 1 compared, 0 regressions, 0 improvements (threshold 10%)"


def test_option_suffixes_do_not_unmatch(tmp_path):
    name = "BM_Pipeline/1f1b/D64/N78144"
    base = write(tmp_path / "base.json", [bench(name + "/iterations:1/real_time", rate=5e6)])
    latest = write(tmp_path / "latest.json", [bench(name + "/min_time:0.300", rate=5e6)])
    rc, out = run(base, latest)
    assert rc == 0
    assert summary(out).startswith("perf: 1 compared, 0 regressions")


def test_errors_new_failure_is_regression_old_failure_is_not(tmp_path):
    base = write(tmp_path / "base.json", [bench("BM_works", rate=5e6),
                                          bench("BM_stub", error="not implemented yet")])
    latest = write(tmp_path / "latest.json", [bench("BM_works", error="boom"),
                                              bench("BM_stub", rate=5e6)])
    rc, out = run(base, latest)
    assert rc == 1
    assert "now fails: boom" in out
    assert "new: baseline errored" in out
    assert summary(out) == "perf: 1 compared, 1 regressions, 0 improvements (threshold 10%)"


def test_contexts_printed_and_mismatch_warned(tmp_path):
    other = dict(CONTEXT, cpu_model="Other CPU 1")
    base = write(tmp_path / "base.json", [bench("BM_a", rate=5e6)])
    latest = write(tmp_path / "latest.json", [bench("BM_a", rate=5e6)], context=other)
    rc, out = run(base, latest)
    assert rc == 0
    assert "Test CPU 9000" in out and "Other CPU 1" in out
    assert "WARNING: cpu_model differs" in out


def test_same_context_no_warning(tmp_path):
    base = write(tmp_path / "base.json", [bench("BM_a", rate=5e6)])
    latest = write(tmp_path / "latest.json", [bench("BM_a", rate=5e6)])
    _, out = run(base, latest)
    assert "WARNING" not in out


def test_repetitions_reduced_to_median_and_aggregates_ignored(tmp_path):
    rows = [bench("BM_a", rate=r) for r in (1e6, 5e6, 5.1e6)]
    rows.append(dict(bench("BM_a_mean", rate=3.7e6), run_name="BM_a", run_type="aggregate"))
    base = write(tmp_path / "base.json", [bench("BM_a", rate=5e6)])
    latest = write(tmp_path / "latest.json", rows)
    rc, out = run(base, latest)
    assert rc == 0
    assert summary(out).startswith("perf: 1 compared, 0 regressions")


@pytest.mark.parametrize("content", ["{not json", '{"benchmarks": [{"no_name": 1}]}'])
def test_unreadable_json_exits_two(tmp_path, content):
    base = write(tmp_path / "base.json", [bench("BM_a", rate=5e6)])
    bad = tmp_path / "latest.json"
    bad.write_text(content)
    rc, _ = run(base, bad)
    assert rc == 2
