"""scripts/compare_perf.py on small synthetic Google Benchmark JSON files.

No benchmark program runs here. Normalisation, the verdict, the regression lines and the exit
codes are tested without Google Benchmark's compare.py (--no-compare-py, or a stub in its
place); one test runs the real compare.py and is skipped where it (or scipy) is missing.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
SCRIPT = SCRIPTS / "compare_perf.py"
CONTEXT = {"cpu_model": "Test CPU 9000", "num_cpus": 2, "ppbench_build_type": "release",
           "commit": "0123abcd", "executable": "build/benchmarks/schedule_throughput"}
# ms; only the compute one is divided by, unless --calibration says otherwise
CALIBRATION = {"BM_Calibration/compute": 2.0, "BM_Calibration/memory": 5.0}


def reps(name, times, unit="ms", cpu_scale=1.0, aggregates=True):
    """Google Benchmark rows of one benchmark's repetitions (iteration rows, then aggregates)."""
    rows = [{"name": name, "run_name": name, "run_type": "iteration", "repetitions": len(times),
             "repetition_index": i, "family_index": 0, "per_family_instance_index": 0,
             "iterations": 10, "real_time": t, "cpu_time": t * cpu_scale, "time_unit": unit,
             "actions_per_second": 1e6}
            for i, t in enumerate(times)]
    if aggregates and len(times) > 1:
        med = sorted(times)[len(times) // 2]
        for agg, value, agg_unit in (("mean", sum(times) / len(times), "time"),
                                     ("median", med, "time"), ("stddev", 0.1, "time"),
                                     ("cv", 0.05, "percentage")):
            rows.append({"name": f"{name}_{agg}", "run_name": name, "run_type": "aggregate",
                         "repetitions": len(times), "aggregate_name": agg,
                         "aggregate_unit": agg_unit, "iterations": len(times),
                         "real_time": value, "cpu_time": value * cpu_scale, "time_unit": unit})
    return rows


def error_row(name, message):
    return {"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True,
            "error_message": message, "iterations": 0, "real_time": 0.0, "cpu_time": 0.0,
            "time_unit": "ns"}


def run_file(path, benches, speed=1.0, context=CONTEXT, calibration=True, n=3):
    """One run: each benchmark's median time in ms (or a list of repetitions), the whole
    machine `speed` times slower (calibration included)."""
    rows = []
    if calibration:
        for name, t in CALIBRATION.items():
            rows += reps(name, [t * speed] * n)
    for name, t in benches.items():
        if isinstance(t, dict):  # a ready-made row list
            rows += t["rows"]
        else:
            times = t if isinstance(t, list) else [t * 0.98, t, t * 1.03][:n]
            rows += reps(name, [x * speed for x in times])
    path.write_text(json.dumps({"context": context, "benchmarks": rows}))
    return path


def run(*args, env=None):
    proc = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, check=False, env=env)
    return proc.returncode, proc.stdout, proc.stderr


def summary(out):
    return out.strip().splitlines()[-1]


def regression_lines(out):
    return [line for line in out.splitlines() if line.startswith("REGRESSION ")]


BENCHES = {"BM_Pipeline/1f1b/D64/N1024": 10.0, "BM_Pipeline/gpipe/D64/N1024": 5.0}
UNTESTED = "without a U test (too few repetitions: threshold alone)"


def spread(t, n=9, step=0.01):
    """n repetitions around t (median t), each `step` of t from the next."""
    return [t * (1 + step * (i - n // 2)) for i in range(n)]


def test_uniformly_slower_machine_is_not_a_regression(tmp_path):
    base = run_file(tmp_path / "baseline-p.json", BENCHES)
    latest = run_file(tmp_path / "latest-p.json", BENCHES, speed=2.0)  # everything 2x slower
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 0
    assert regression_lines(out) == []
    assert summary(out).startswith("perf: 2 compared, 0 regressions beyond 15%, 0 improvements")
    assert "real time 2 ms -> 4 ms (x2.000)" in out
    # Raw, the same files are two regressions.
    rc, out, _ = run(base, latest, "--no-compare-py", "--raw", "--fail-on-regression")
    assert rc == 1
    assert summary(out).startswith("perf: 2 compared, 2 regressions beyond 15%")


def test_regression_line_and_exit_codes(tmp_path):
    base = run_file(tmp_path / "baseline-p.json", {n: spread(t) for n, t in BENCHES.items()}, n=9)
    latest = run_file(tmp_path / "latest-p.json", {"BM_Pipeline/1f1b/D64/N1024": spread(13.0),
                                                   "BM_Pipeline/gpipe/D64/N1024": spread(5.2)},
                      n=9)
    rc, out, _ = run(base, latest, "--no-compare-py")
    assert rc == 0  # reported, not failing, without the flag
    lines = regression_lines(out)
    assert len(lines) == 1
    # program, benchmark, normalised times (10 ms / 2 ms = 5, 13 / 2 = 6.5), ratio, the U test
    # (9 and 9 repetitions that do not overlap: scipy's p is 0.000412), raw times
    assert lines[0] == ("REGRESSION schedule_throughput BM_Pipeline/1f1b/D64/N1024: 5 -> 6.5 "
                        "calibration times (x1.300, +30.0% > 15%, U test p=0.00041 < 0.05); "
                        "raw CPU time 10 ms -> 13 ms")
    assert summary(out) == ("perf: 2 compared, 1 regressions beyond 15%, 0 improvements, "
                            "0 not run now; medians of repetitions, each divided by its run's "
                            "calibration")
    assert out.strip().splitlines()[-2] == lines[0]  # the regression lines come last
    rc, _, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 1


def test_threshold_noise_and_improvement(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_a": 10.0, "BM_b": 10.0, "BM_c": 10.0})
    latest = run_file(tmp_path / "l.json", {"BM_a": 10.9, "BM_b": 8.0, "BM_c": 9.5})
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 0
    assert summary(out).startswith("perf: 3 compared, 0 regressions beyond 15%, 1 improvements")
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression",
                     "--threshold", "0.05")
    assert rc == 1
    assert [line.split()[2].rstrip(":") for line in regression_lines(out)] == ["BM_a"]
    assert summary(out).startswith("perf: 3 compared, 1 regressions beyond 5%, 2 improvements")


# ---- the U test beside the threshold -----------------------------------------------------------

# 9 repetitions each (make perf-ci's), medians 10 and 13 ms: x1.30, past the 15 % threshold, but
# the repetitions overlap through most of their range (scipy's p = 0.453).
OVERLAP_BASE = [5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 13.0, 14.0, 15.0]
OVERLAP_SLOWER = [5.5, 6.5, 7.5, 9.0, 13.0, 13.5, 14.5, 15.5, 16.0]
# Median 8 ms: x0.8, past the threshold the other way, and as spread (p = 0.536).
OVERLAP_FASTER = [4.0, 5.5, 6.5, 7.0, 8.0, 9.5, 12.0, 13.0, 14.5]


def test_past_the_threshold_but_not_significant_is_no_regression(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_a": OVERLAP_BASE, "BM_b": OVERLAP_BASE}, n=9)
    latest = run_file(tmp_path / "l.json", {"BM_a": OVERLAP_SLOWER, "BM_b": OVERLAP_FASTER}, n=9)
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 0
    assert regression_lines(out) == []
    assert ("NOT SIGNIFICANT schedule_throughput BM_a: 5 -> 6.5 calibration times (x1.300, "
            "+30.0% > 15%, but U test p=0.45 >= 0.05: the repetitions do not differ, not a "
            "regression)") in out.splitlines()
    assert "NOT SIGNIFICANT schedule_throughput BM_b" not in out  # faster: no line, no count
    assert summary(out).startswith(
        "perf: 2 compared, 0 regressions beyond 15%, 0 improvements, 0 not run now, 2 past the "
        "threshold but not significant (U test p >= 0.05);")
    # The own table shows the p-value and why neither counts.
    row = next(line for line in out.splitlines() if line.startswith("BM_a "))
    assert row.split()[-3:] == ["0.45", "not", "significant"]


def test_past_the_threshold_and_significant_is_a_regression_or_improvement(tmp_path):
    # 5 repetitions (bubble_fidelity's) that do not overlap: the exact p is 2 / 252 = 0.0079.
    base = run_file(tmp_path / "b.json", {"BM_a": spread(10.0, 5), "BM_b": spread(10.0, 5)},
                    n=5)
    latest = run_file(tmp_path / "l.json", {"BM_a": spread(13.0, 5), "BM_b": spread(8.0, 5)},
                      n=5)
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 1
    assert regression_lines(out) == [
        "REGRESSION schedule_throughput BM_a: 5 -> 6.5 calibration times (x1.300, +30.0% > 15%, "
        "U test p=0.0079 < 0.05); raw CPU time 10 ms -> 13 ms"]
    assert summary(out).startswith("perf: 2 compared, 1 regressions beyond 15%, "
                                   "1 improvements, 0 not run now;")
    assert "U test: " not in out and UNTESTED not in out  # every benchmark was tested


def test_significant_but_within_the_threshold_is_unchanged(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_a": spread(10.0, step=0.001)}, n=9)
    latest = run_file(tmp_path / "l.json", {"BM_a": spread(10.5, step=0.001)}, n=9)
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 0
    assert summary(out).startswith("perf: 1 compared, 0 regressions beyond 15%, 0 improvements, "
                                   "0 not run now;")


@pytest.mark.parametrize("n", [1, 3])
def test_too_few_repetitions_leave_the_threshold_alone_and_say_so(tmp_path, n):
    """3 and 3 repetitions cannot give a p below 0.1: requiring p < 0.05 there would hide every
    regression, so the threshold decides alone, as the output says."""
    base = run_file(tmp_path / "b.json", {"BM_a": spread(10.0, n)}, n=n)
    latest = run_file(tmp_path / "l.json", {"BM_a": spread(13.0, n)}, n=n)
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 1
    assert regression_lines(out) == [
        "REGRESSION schedule_throughput BM_a: 5 -> 6.5 calibration times (x1.300, +30.0% > 15%, "
        f"no U test: {n} and {n} repetitions are too few); raw CPU time 10 ms -> 13 ms"]
    assert (f"U test: 1 of the benchmarks compared have too few repetitions for it (fewest {n} "
            f"and {n}: no p below 0.05 is possible), so the threshold alone decides for them: "
            "BM_a") in out.splitlines()
    assert summary(out).startswith("perf: 1 compared, 1 regressions beyond 15%, 0 improvements, "
                                   f"0 not run now, 1 {UNTESTED};")


def test_files_of_aggregates_only_have_no_u_test(tmp_path):
    def aggregates_only(path, t):
        rows = []
        for name, c in CALIBRATION.items():
            rows += [r for r in reps(name, [c] * 9) if r["run_type"] == "aggregate"]
        rows += [r for r in reps("BM_a", spread(t)) if r["run_type"] == "aggregate"]
        path.write_text(json.dumps({"context": CONTEXT, "benchmarks": rows}))
        return path

    rc, out, _ = run(aggregates_only(tmp_path / "b.json", 10.0),
                     aggregates_only(tmp_path / "l.json", 13.0), "--no-compare-py")
    assert rc == 0
    assert "no U test: 0 and 0 repetitions are too few" in regression_lines(out)[0]


def _compare_perf_module():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import compare_perf
    finally:
        sys.path.pop(0)
    return compare_perf


# (x, y, scipy.stats.mannwhitneyu(x, y, alternative="two-sided").pvalue, scipy 1.10)
KNOWN_P = [
    ([1, 2, 3, 4], [5, 6, 7, 8], 2 / 70),  # exact, no overlap
    ([1.0, 2.5, 3.0], [2.0, 4.0, 5.0], 0.4),  # exact
    (OVERLAP_BASE, OVERLAP_SLOWER, 0.45267918106292115),  # normal approximation (9 and 9)
    ([1, 2, 2, 3], [2, 3, 4, 4], 0.13416918012812584),  # ties: normal approximation
    ([1, 1, 1], [1, 1, 1], 1.0),  # all tied
]


@pytest.mark.parametrize("x, y, p", KNOWN_P)
def test_mann_whitney_p_as_scipy_gives_it(x, y, p):
    assert _compare_perf_module().mann_whitney_p(x, y) == pytest.approx(p, rel=1e-9)


def test_mann_whitney_p_against_scipy_itself():
    """Random samples, exact and approximate, with and without ties, where a python3 here has
    scipy (the .venv has not; Debian's python3-scipy is for /usr/bin/python3)."""
    py = next((p for p in ("/usr/bin/python3", shutil.which("python3")) if p and subprocess.run(
        [p, "-c", "import scipy.stats"], capture_output=True, check=False).returncode == 0), None)
    if py is None:
        pytest.skip("no python3 here imports scipy")
    import random
    rng = random.Random(7)
    cases = []
    for _ in range(300):
        n1, n2 = rng.randint(1, 12), rng.randint(1, 12)
        if rng.random() < 0.4:
            cases.append(([rng.randint(1, 5) for _ in range(n1)],
                          [rng.randint(1, 6) for _ in range(n2)]))
        else:
            shift = rng.choice([0.0, 0.3, 1.0])
            cases.append(([rng.random() for _ in range(n1)],
                          [rng.random() + shift for _ in range(n2)]))
    scipy_p = json.loads(subprocess.run(
        [py, "-c", "import json, sys, math\n"
         "from scipy.stats import mannwhitneyu\n"
         "ps = [mannwhitneyu(x, y, alternative='two-sided').pvalue for x, y in "
         "json.load(sys.stdin)]\n"
         "print(json.dumps([1.0 if math.isnan(p) else p for p in ps]))"],
        input=json.dumps(cases), capture_output=True, text=True, check=True).stdout)
    ours = [_compare_perf_module().mann_whitney_p(x, y) for x, y in cases]
    assert ours == pytest.approx(scipy_p, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("n1, n2, possible", [(3, 3, False), (4, 4, True), (2, 9, True),
                                              (1, 39, False), (1, 40, True), (0, 9, False)])
def test_u_test_possible_from_the_smallest_p(n1, n2, possible):
    assert _compare_perf_module().u_test_possible(n1, n2) is possible


# ---- which runs are of one machine -----------------------------------------------------------


@pytest.mark.parametrize("change, named", [
    ({"num_cpus": 4}, "num_cpus 2, now 4"),
    ({"host_name": "other"}, "host_name 'vm', now 'other'"),
    ({"cpu_model": "Other CPU 1", "num_cpus": 8},
     "cpu_model 'Test CPU 9000', now 'Other CPU 1'; num_cpus 2, now 8"),
])
def test_another_machine_is_named_by_the_field_that_differs(tmp_path, change, named):
    ctx = dict(CONTEXT, host_name="vm")
    base = run_file(tmp_path / "b.json", {"BM_a": 10.0}, context=ctx)
    latest = run_file(tmp_path / "l.json", {"BM_a": 13.0}, context=dict(ctx, **change))
    _, out, _ = run(base, latest, "--no-compare-py")
    assert (f"NOTE: the baseline is from another machine ({named}): only the "
            "calibration-normalised ratios are compared, raw times are not") in out.splitlines()
    assert "raw" not in regression_lines(out)[0]  # raw times of two machines are not compared


def test_a_machine_field_one_run_lacks_is_a_difference(tmp_path):
    ctx = dict(CONTEXT, host_name="vm")
    base = run_file(tmp_path / "b.json", {"BM_a": 10.0},
                    context={k: v for k, v in ctx.items() if k != "num_cpus"})
    latest = run_file(tmp_path / "l.json", {"BM_a": 13.0}, context=ctx)
    _, out, _ = run(base, latest, "--no-compare-py")
    assert "another machine (num_cpus 'not recorded', now 2)" in out
    assert "raw" not in regression_lines(out)[0]


def test_no_machine_field_in_either_run_is_not_taken_for_one_machine(tmp_path):
    ctx = {"executable": CONTEXT["executable"]}
    base = run_file(tmp_path / "b.json", {"BM_a": 10.0}, context=ctx)
    latest = run_file(tmp_path / "l.json", {"BM_a": 13.0}, context=ctx)
    _, out, _ = run(base, latest, "--no-compare-py")
    assert ("NOTE: neither run records cpu_model, num_cpus, host_name, so they may be from two "
            "machines: only the calibration-normalised ratios are compared, raw times are not"
            ) in out.splitlines()
    assert "raw" not in regression_lines(out)[0]


def test_one_machine_despite_clock_and_runner_label(tmp_path):
    """mhz_per_cpu moves with the clock on one machine, and runner is only a label."""
    ctx = dict(CONTEXT, host_name="vm", mhz_per_cpu=2596, runner="vm")
    base = run_file(tmp_path / "b.json", {"BM_a": 10.0}, context=ctx)
    latest = run_file(tmp_path / "l.json", {"BM_a": 13.0},
                      context=dict(ctx, mhz_per_cpu=3100, runner="ci-small"))
    _, out, _ = run(base, latest, "--no-compare-py")
    assert "NOTE" not in out
    assert regression_lines(out)[0].endswith("; raw CPU time 10 ms -> 13 ms")


# ---- benchmarks a program did not register here ------------------------------------------------


def test_benchmarks_not_registered_are_not_run_now_with_the_reason(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_Fidelity/1f1b/D2/N8/manual_time": 10.0})
    why = ("BM_Fidelity at D=2, D=4: 1 core to run on, and D ranks on fewer than D cores "
           "time-share them, which measures the OS scheduler, not the schedule")
    latest = run_file(tmp_path / "l.json", {}, context=dict(CONTEXT, ppbench_not_registered=why))
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 1
    assert out.strip().splitlines()[-3:-1] == [
        f"NOT RUN NOW schedule_throughput BM_Fidelity/1f1b/D2/N8: in {base}, not in {latest}",
        f"NOT REGISTERED schedule_throughput: {why} (said by {latest})"]
    assert summary(out).startswith("perf: 0 compared, 0 regressions beyond 15%, "
                                   "0 improvements, 1 not run now;")


def test_median_of_repetitions_resists_an_outlier(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_a": [10.0, 10.1, 9.9, 10.0, 10.2]}, n=5)
    latest = run_file(tmp_path / "l.json", {"BM_a": [10.0, 30.0, 9.8, 10.1, 10.3]}, n=5)
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 0
    assert summary(out).startswith("perf: 1 compared, 0 regressions")


def test_aggregates_only_files_use_the_median_row(tmp_path):
    def aggregates_only(path, speed, t):
        rows = []
        for name, c in CALIBRATION.items():
            rows += [r for r in reps(name, [c * speed] * 3) if r["run_type"] == "aggregate"]
        rows += [r for r in reps("BM_a", [t, t, t * 5]) if r["run_type"] == "aggregate"]
        path.write_text(json.dumps({"context": CONTEXT, "benchmarks": rows}))
        return path

    base = aggregates_only(tmp_path / "b.json", 1.0, 10.0)
    latest = aggregates_only(tmp_path / "l.json", 1.5, 15.0)  # mean would be off, median not
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 0
    assert summary(out).startswith("perf: 1 compared, 0 regressions")


def test_normalised_copies(tmp_path):
    base = run_file(tmp_path / "baseline-p.json", {"BM_a/min_time:0.100": 10.0})
    latest = run_file(tmp_path / "latest-p.json", {"BM_a": 20.0}, speed=1.0)
    # Latest machine 2x slower by its calibration; BM_a 2x slower: the same normalised time.
    doc = json.loads(latest.read_text())
    for row in doc["benchmarks"]:
        if row["name"].startswith("BM_Calibration"):
            row["real_time"] *= 2
            row["cpu_time"] *= 4
    latest.write_text(json.dumps(doc))
    outdir = tmp_path / "norm"
    rc, out, _ = run(base, latest, "--no-compare-py", "--normalised-dir", outdir)
    # BM_a is measured in CPU time: 10 / 2 ms -> 20 / 8 ms, twice as fast
    assert rc == 0 and summary(out).startswith("perf: 1 compared, 0 regressions beyond 15%, "
                                               "1 improvements")
    # named by side and program (the context's executable), not by the input's file name
    b = json.loads((outdir / "baseline-schedule_throughput.normalised.json").read_text())
    lt = json.loads((outdir / "latest-schedule_throughput.normalised.json").read_text())
    for doc in (b, lt):
        names = [r["name"] for r in doc["benchmarks"]]
        # calibration gone, option suffix gone, only the median aggregate kept
        assert names == ["BM_a", "BM_a", "BM_a", "BM_a_median"]
        assert {r["time_unit"] for r in doc["benchmarks"]} == {"ns"}
        assert "ppbench_normalised" in doc["context"]
        assert doc["context"]["cpu_model"] == "Test CPU 9000"
    # The baseline keeps its own times; the latest's are scaled by 2 ms / 4 ms (real) and by
    # the CPU calibration, 2 ms / 8 ms (cpu).
    assert b["benchmarks"][-1]["real_time"] == pytest.approx(10e6)
    assert lt["benchmarks"][-1]["real_time"] == pytest.approx(20e6 * 0.5)
    assert lt["benchmarks"][-1]["cpu_time"] == pytest.approx(20e6 * 0.25)
    assert lt["benchmarks"][0]["actions_per_second"] == 1e6  # counters unchanged


def test_each_benchmark_compared_on_its_own_measure(tmp_path):
    """Real time for /real_time and /manual_time benchmarks, else the CPU time."""
    def write(path, real_slowdown):
        rows = []
        for name, c in CALIBRATION.items():
            rows += reps(name, [c] * 3)
        for name in ("BM_cpu", "BM_wall/real_time", "BM_layer/manual_time"):
            rows += reps(name, [10.0 * real_slowdown] * 3, cpu_scale=1 / real_slowdown)
        path.write_text(json.dumps({"context": CONTEXT, "benchmarks": rows}))
        return path

    # Waiting (real time x1.5, the same CPU time): only the real-time benchmarks regress.
    rc, out, _ = run(write(tmp_path / "b.json", 1.0), write(tmp_path / "l.json", 1.5),
                     "--no-compare-py")
    assert sorted(line.split()[2] for line in regression_lines(out)) == [
        "BM_layer:", "BM_wall:"]
    assert "raw real time 10 ms -> 15 ms" in regression_lines(out)[0]
    assert summary(out).startswith("perf: 3 compared, 2 regressions")


def two_program_pairs(tmp_path) -> list:
    """A baseline and a latest file of two programs, BM_a 30 % slower in both."""
    pairs = []
    for prog in ("schedule_throughput", "executor_overhead"):
        ctx = dict(CONTEXT, executable=f"build/benchmarks/{prog}")
        pairs += [run_file(tmp_path / f"baseline-{prog}.json", {"BM_a": 1.0}, context=ctx),
                  run_file(tmp_path / f"latest-{prog}.json", {"BM_a": 1.3}, context=ctx)]
    return pairs


def test_threshold_for_one_program(tmp_path):
    pairs = two_program_pairs(tmp_path)
    rc, out, _ = run(*pairs, "--no-compare-py", "--threshold-for", "executor_overhead=0.5")
    assert rc == 0
    assert [line.split()[1] for line in regression_lines(out)] == ["schedule_throughput"]
    assert "== executor_overhead:" in out and "(threshold 50%)" in out
    assert summary(out).startswith("perf: 2 compared, 1 regressions beyond 15% "
                                   "(executor_overhead: 50%), 0 improvements")
    rc, _, err = run(*pairs, "--no-compare-py", "--threshold-for", "executor_overhead")
    assert rc == 2 and "PROGRAM=FRACTION" in err


def test_threshold_for_a_program_not_given_is_refused(tmp_path):
    pairs = two_program_pairs(tmp_path)
    rc, out, err = run(*pairs, "--no-compare-py", "--threshold-for", "executor_overhead=0.5",
                       "--threshold-for", "executor_overhed=0.5")
    assert rc == 2 and out == ""
    assert err.splitlines() == [
        "perf: --threshold-for names executor_overhed, which is none of the programs given "
        "(allowed: executor_overhead, schedule_throughput)"]
    # A program whose baseline is missing is still given: its threshold is not a mistake.
    pairs[2].unlink()
    rc, out, _ = run(*pairs, "--no-compare-py", "--threshold-for", "executor_overhead=0.5")
    assert rc == 0 and "no baseline" in out


def test_memory_calibration_shown_not_divided_by_unless_asked(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_a": 10.0})
    latest = run_file(tmp_path / "l.json", {"BM_a": 10.0})
    doc = json.loads(latest.read_text())
    for row in doc["benchmarks"]:
        if row["name"].startswith("BM_Calibration/memory"):  # memory bandwidth 4x lower now
            row["real_time"] *= 4
            row["cpu_time"] *= 4
    latest.write_text(json.dumps(doc))
    rc, out, _ = run(base, latest, "--no-compare-py")
    assert "memory 5 ms -> 20 ms" in out
    assert summary(out).startswith("perf: 1 compared, 0 regressions beyond 15%, 0 improvements")
    # Divided by the geometric mean of both, BM_a looks twice as fast.
    rc, out, _ = run(base, latest, "--no-compare-py", "--calibration", "compute,memory")
    assert "geometric mean of BM_Calibration/compute x BM_Calibration/memory" in out
    assert summary(out).startswith("perf: 1 compared, 0 regressions beyond 15%, 1 improvements")
    rc, _, err = run(base, latest, "--no-compare-py", "--calibration", "nope")
    assert rc == 2 and "no BM_Calibration/nope rows" in err


def test_units_are_converted(tmp_path):
    base = run_file(tmp_path / "b.json", {})
    latest = run_file(tmp_path / "l.json", {})
    for path, t, unit in ((base, 10.0, "ms"), (latest, 12000.0, "us")):
        doc = json.loads(path.read_text())
        doc["benchmarks"] += reps("BM_slow", [t] * 3, unit=unit)
        path.write_text(json.dumps(doc))
    rc, out, _ = run(base, latest, "--no-compare-py")
    assert [line.split()[2] for line in regression_lines(out)] == ["BM_slow:"]
    assert "raw CPU time 10 ms -> 12 ms" in regression_lines(out)[0]


def test_other_machine_compares_normalised_ratios_only(tmp_path):
    other = dict(CONTEXT, cpu_model="Other CPU 1")
    base = run_file(tmp_path / "b.json", BENCHES)
    # A machine twice as fast (raw 6.5 ms and 2.5 ms), where 1f1b is 30% slower than it should be.
    latest = run_file(tmp_path / "l.json", {"BM_Pipeline/1f1b/D64/N1024": 13.0,
                                            "BM_Pipeline/gpipe/D64/N1024": 5.0},
                      speed=0.5, context=other)
    rc, out, _ = run(base, latest, "--no-compare-py")
    assert rc == 0
    assert "the baseline is from another machine" in out
    assert "'Test CPU 9000'" in out and "'Other CPU 1'" in out
    lines = regression_lines(out)
    assert len(lines) == 1 and "BM_Pipeline/1f1b/D64/N1024" in lines[0]
    assert "(x1.300," in lines[0] and "raw" not in lines[0]


def test_same_machine_no_note(tmp_path):
    base = run_file(tmp_path / "b.json", BENCHES)
    latest = run_file(tmp_path / "l.json", BENCHES)
    _, out, _ = run(base, latest, "--no-compare-py")
    assert "another machine" not in out and "WARNING" not in out


def test_debug_build_warned(tmp_path):
    base = run_file(tmp_path / "b.json", BENCHES)
    latest = run_file(tmp_path / "l.json", BENCHES,
                      context=dict(CONTEXT, ppbench_build_type="debug (assertions on)"))
    _, out, _ = run(base, latest, "--no-compare-py")
    assert "WARNING: the latest run is a debug build" in out


def test_failures(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_works": 1.0, "BM_stub": {"rows": [
        error_row("BM_stub", "not implemented yet")]}})
    latest = run_file(tmp_path / "l.json", {"BM_works": {"rows": [error_row("BM_works", "boom")]},
                                            "BM_stub": 1.0})
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 1
    assert "REGRESSION schedule_throughput BM_works: fails now: boom" in out
    assert "BM_stub: not compared (ran now, failed in the baseline)" in out
    assert summary(out).startswith("perf: 1 compared, 1 regressions")


def test_new_and_missing_benchmarks_listed_not_compared(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_a": 1.0, "BM_gone": 1.0})
    latest = run_file(tmp_path / "l.json", {"BM_a": 1.0, "BM_new": 9.0})
    rc, out, _ = run(base, latest, "--no-compare-py")
    assert rc == 0
    assert "not in the baseline (new, not compared): BM_new" in out
    assert "in the baseline but not run now (not compared): BM_gone" in out
    assert f"NOT RUN NOW schedule_throughput BM_gone: in {base}, not in {latest}" in out
    assert summary(out).startswith("perf: 1 compared, 0 regressions beyond 15%, "
                                   f"0 improvements, 1 not run now, 1 {UNTESTED};")
    # A benchmark that no longer runs may hide a regression: it fails the run like one.
    rc, _, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 1


def test_only_new_benchmarks_pass_the_failing_run(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_a": 1.0})
    latest = run_file(tmp_path / "l.json", {"BM_a": 1.0, "BM_new": 9.0})
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 0
    assert summary(out).startswith("perf: 1 compared, 0 regressions beyond 15%, "
                                   f"0 improvements, 0 not run now, 1 {UNTESTED};")


def test_latest_of_calibration_only_counts_every_benchmark_not_run(tmp_path):
    base = run_file(tmp_path / "b.json", BENCHES)
    latest = run_file(tmp_path / "l.json", {})  # e.g. a filter that kept BM_Calibration only
    rc, out, _ = run(base, latest, "--no-compare-py")
    assert rc == 0
    assert summary(out).startswith("perf: 0 compared, 0 regressions beyond 15%, "
                                   "0 improvements, 2 not run now;")
    rc, out, _ = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 1
    assert [line.split()[4].rstrip(":") for line in out.splitlines()
            if line.startswith("NOT RUN NOW ")] == sorted(BENCHES)


def test_pair_with_no_benchmark_in_common_is_refused(tmp_path):
    base = run_file(tmp_path / "b.json", {"BM_Layer/linear/f32/F": 1.0})
    latest = run_file(tmp_path / "l.json", {"BM_Executor/1f1b/D2/N32": 1.0})
    for flags in ((), ("--fail-on-regression",), ("--raw",)):
        rc, out, err = run(base, latest, "--no-compare-py", *flags)
        assert rc == 2 and out == ""
        assert err.splitlines() == [
            f"perf: {base} (executable schedule_throughput) and {latest} (executable "
            "schedule_throughput) have no benchmark in common beside the calibration, so "
            "nothing would be compared (allowed: a baseline and a latest run of the same "
            "program's benchmarks)"]


def test_pair_of_two_programs_is_refused(tmp_path):
    base = run_file(tmp_path / "baseline-layer_flops.json", BENCHES,
                    context=dict(CONTEXT, executable="build/benchmarks/layer_flops"))
    latest = run_file(tmp_path / "latest-executor_overhead.json", BENCHES,
                      context=dict(CONTEXT, executable="/ci/build/benchmarks/executor_overhead"))
    rc, out, err = run(base, latest, "--no-compare-py", "--fail-on-regression")
    assert rc == 2 and out == ""
    assert err.splitlines() == [
        f"perf: {base} (executable layer_flops) and {latest} (executable executor_overhead) are "
        "runs of two programs (allowed: a baseline and a latest run of the same program)"]
    # The same program built in another folder is the same program.
    other_build = run_file(tmp_path / "l.json", BENCHES,
                           context=dict(CONTEXT, executable="/ci/build-perf/layer_flops"))
    rc, _, _ = run(base, other_build, "--no-compare-py", "--fail-on-regression")
    assert rc == 0


def test_same_file_names_in_two_folders_get_distinct_copies(tmp_path):
    """baseline a/x.json and latest b/x.json: compare.py must get two copies, the latest's with
    the latest's times (one shared copy would compare the latest with itself)."""
    stub = tmp_path / "compare.py"
    record = tmp_path / "args.json"
    stub.write_text("import json, sys\n"
                    f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = run_file(tmp_path / "a" / "x.json", {"BM_a": 10.0})
    latest = run_file(tmp_path / "b" / "x.json", {"BM_a": 13.0})
    outdir = tmp_path / "norm"
    rc, out, _ = run(base, latest, "--compare-py", stub, "--compare-python", sys.executable,
                     "--normalised-dir", outdir)
    assert rc == 0 and len(regression_lines(out)) == 1
    copies = json.loads(record.read_text())[-2:]
    assert copies == [str(outdir / "baseline-schedule_throughput.normalised.json"),
                      str(outdir / "latest-schedule_throughput.normalised.json")]
    medians = [next(r["cpu_time"] for r in json.loads(Path(c).read_text())["benchmarks"]
                    if r["name"] == "BM_a_median") for c in copies]
    assert medians == [pytest.approx(10e6), pytest.approx(13e6)]


def test_two_pairs_of_one_program_get_numbered_copies(tmp_path):
    files = [run_file(tmp_path / f"{side}{i}.json", {"BM_a": t})
             for i in (1, 2) for side, t in (("b", 1.0), ("l", 2.0 * i))]
    outdir = tmp_path / "norm"
    rc, _, _ = run(*files, "--no-compare-py", "--normalised-dir", outdir)
    assert rc == 0
    assert sorted(p.name for p in outdir.iterdir()) == [
        f"{i}-{side}-schedule_throughput.normalised.json"
        for i in (1, 2) for side in ("baseline", "latest")]
    latest2 = json.loads((outdir / "2-latest-schedule_throughput.normalised.json").read_text())
    assert latest2["benchmarks"][-1]["cpu_time"] == pytest.approx(4e6)


def test_copies_never_replace_an_input(tmp_path):
    base = run_file(tmp_path / "baseline-schedule_throughput.normalised.json", BENCHES)
    latest = run_file(tmp_path / "l.json", BENCHES)
    before = base.read_text()
    rc, out, err = run(base, latest, "--no-compare-py", "--normalised-dir", tmp_path)
    assert rc == 2 and out == ""
    assert f"--normalised-dir would overwrite {base}" in err
    assert base.read_text() == before


def test_several_pairs_one_summary(tmp_path):
    pairs = []
    for prog, slow in (("schedule_throughput", 1.0), ("layer_flops", 1.5)):
        ctx = dict(CONTEXT, executable=f"build/benchmarks/{prog}")
        pairs += [run_file(tmp_path / f"baseline-{prog}.json", {"BM_a": 1.0}, context=ctx),
                  run_file(tmp_path / f"latest-{prog}.json", {"BM_a": slow}, context=ctx)]
    rc, out, _ = run(*pairs, "--no-compare-py")
    assert rc == 0
    assert "== schedule_throughput:" in out and "== layer_flops:" in out
    assert [line.split()[1] for line in regression_lines(out)] == ["layer_flops"]
    assert summary(out).startswith("perf: 2 compared, 1 regressions beyond 15%")


def test_missing_baseline_exits_zero_with_hint(tmp_path):
    latest = run_file(tmp_path / "latest-p.json", BENCHES)
    missing = tmp_path / "baseline-p.json"
    rc, out, _ = run(missing, latest, "--no-compare-py")
    assert rc == 0
    assert "make perf-ci-baseline" in out and f"cp {latest} {missing}" in out
    assert summary(out).startswith("perf: 0 compared, 0 regressions")


def test_missing_calibration_is_incompatible_unless_raw(tmp_path):
    base = run_file(tmp_path / "b.json", BENCHES, calibration=False)
    latest = run_file(tmp_path / "l.json", BENCHES)
    rc, out, err = run(base, latest, "--no-compare-py")
    assert rc == 2
    assert "no BM_Calibration/compute rows" in err and "--raw" in err
    assert out == ""  # nothing printed before the inputs are known to be good
    rc, out, _ = run(base, latest, "--no-compare-py", "--raw")
    assert rc == 0
    assert summary(out) == ("perf: 2 compared, 0 regressions beyond 15%, 0 improvements, "
                            f"0 not run now, 2 {UNTESTED}; raw times, no calibration")


@pytest.mark.parametrize("content", ["{not json", '{"benchmarks": [{"no_name": 1}]}',
                                     '{"context": {}}', "[]",
                                     '{"benchmarks": [{"name": "BM_a", "real_time": 1, '
                                     '"cpu_time": 1, "time_unit": "fortnights"}]}'])
def test_unreadable_json_exits_two(tmp_path, content):
    base = run_file(tmp_path / "b.json", BENCHES)
    bad = tmp_path / "l.json"
    bad.write_text(content)
    rc, _, err = run(base, bad, "--no-compare-py")
    assert rc == 2
    assert err.startswith("perf: ")


def test_missing_latest_and_odd_arguments_exit_two(tmp_path):
    base = run_file(tmp_path / "b.json", BENCHES)
    rc, _, err = run(base, tmp_path / "nope.json", "--no-compare-py")
    assert rc == 2 and "cannot read" in err
    rc, _, _ = run(base, "--no-compare-py")
    assert rc == 2


def test_compare_py_missing_falls_back_to_own_table(tmp_path):
    base = run_file(tmp_path / "b.json", BENCHES)
    latest = run_file(tmp_path / "l.json", BENCHES)
    rc, out, _ = run(base, latest, "--compare-py", tmp_path / "no-compare.py")
    assert rc == 0
    assert "compare.py not found" in out and "libbenchmark-tools" in out
    assert "BM_Pipeline/gpipe/D64/N1024" in out  # own table
    assert summary(out).startswith("perf: 2 compared, 0 regressions")


def test_compare_py_is_run_on_the_normalised_copies(tmp_path):
    """A stub in compare.py's place records how it is invoked."""
    stub = tmp_path / "compare.py"
    record = tmp_path / "args.json"
    stub.write_text("import json, sys\n"
                    f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
                    "print('STUB TABLE')\n")
    base = run_file(tmp_path / "baseline-p.json", BENCHES)
    latest = run_file(tmp_path / "latest-p.json", BENCHES, speed=3.0)
    outdir = tmp_path / "norm"
    rc, out, _ = run(base, latest, "--compare-py", stub, "--compare-python", sys.executable,
                     "--normalised-dir", outdir)
    assert rc == 0
    assert "STUB TABLE" in out
    args = json.loads(record.read_text())
    assert args == ["--no-color", "-a", "benchmarks",
                    str(outdir / "baseline-schedule_throughput.normalised.json"),
                    str(outdir / "latest-schedule_throughput.normalised.json")]
    # The stub's table comes before the verdict.
    assert out.index("STUB TABLE") < out.index("perf: 2 compared")


def _real_compare_py():
    path = os.environ.get("PPBENCH_COMPARE_PY") or "/usr/share/benchmark/compare.py"
    if not Path(path).is_file():
        return None, None
    for py in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if py and subprocess.run([py, "-c", "import numpy, scipy.stats"], capture_output=True,
                                 check=False).returncode == 0:
            return path, py
    return path, None


def test_real_compare_py(tmp_path):
    path, py = _real_compare_py()
    if path is None:
        pytest.skip("Google Benchmark's compare.py is not installed (Debian: libbenchmark-tools)")
    if py is None:
        pytest.skip("no python3 here imports scipy, which compare.py needs (python3-scipy)")
    base = run_file(tmp_path / "baseline-p.json", BENCHES, n=3)
    latest = run_file(tmp_path / "latest-p.json",
                      {"BM_Pipeline/1f1b/D64/N1024": 13.0, "BM_Pipeline/gpipe/D64/N1024": 5.0},
                      speed=2.0, n=3)
    rc, out, _ = run(base, latest, "--compare-py", path, "--compare-python", py)
    assert rc == 0
    assert "Comparing " in out and "OVERALL_GEOMEAN" in out
    # compare.py's row for the median: +0.30 relative change of the normalised median
    row = next(line for line in out.splitlines()
               if line.startswith("BM_Pipeline/1f1b/D64/N1024_median"))
    assert row.split()[1] == "+0.3000"
    assert len(regression_lines(out)) == 1


def test_verdict_p_is_compare_py_p(tmp_path):
    """The p in a regression line is the one compare.py prints for the same copies."""
    path, py = _real_compare_py()
    if path is None or py is None:
        pytest.skip("Google Benchmark's compare.py, or a python3 with scipy, is not here")
    base = run_file(tmp_path / "baseline-p.json", {"BM_a": OVERLAP_BASE, "BM_b": spread(10.0)},
                    n=9)
    latest = run_file(tmp_path / "latest-p.json", {"BM_a": OVERLAP_SLOWER, "BM_b": spread(12.0)},
                      n=9, speed=2.0)
    rc, out, _ = run(base, latest, "--compare-py", path, "--compare-python", py)
    assert rc == 0
    cpu_p = {line.split()[0]: float(line.split()[2]) for line in out.splitlines()
             if line.startswith("BM_") and "_pvalue" in line.split()[0]}
    assert cpu_p["BM_a_pvalue"] == pytest.approx(0.4527, abs=1e-4)
    assert "BM_a: 5 -> 6.5 calibration times (x1.300, +30.0% > 15%, but U test p=0.45" in out
    assert cpu_p["BM_b_pvalue"] < 0.05 and len(regression_lines(out)) == 1


def test_normalize_name_kept_for_compare_torch():
    sys.path.insert(0, str(SCRIPTS))
    try:
        from compare_perf import normalize_name
    finally:
        sys.path.pop(0)
    assert normalize_name("BM_a/D64/min_time:0.300/repeats:3/manual_time") == "BM_a/D64"
