#!/usr/bin/env python3
"""Compare Google Benchmark JSON runs with their baselines, normalised by the machine's speed.

    scripts/compare_perf.py BASELINE.json LATEST.json [BASELINE.json LATEST.json ...]
        [--threshold 0.15] [--threshold-for PROGRAM=T ...] [--fail-on-regression] [--raw]
        [--calibration compute[,memory]] [--normalised-dir DIR]
        [--compare-py PATH] [--compare-python PYTHON] [--no-compare-py]

Arguments come in pairs: a baseline and the latest run of the same program (make perf-ci passes
one pair per benchmark program). For each pair:

1. Both files are read (Google Benchmark JSON). Every ppbench CPU benchmark program runs the
   calibration benchmarks BM_Calibration/compute and BM_Calibration/memory in the same run
   (benchmarks/calibration.cpp). The run's calibration time is the median over the repetitions
   of the calibration benchmarks --calibration names (their geometric mean when several), in
   real time and in CPU time. The default here is compute; make perf-ci passes compute,memory,
   because a shared machine slows ppbench's benchmarks through the core it lends (compute) and
   through the memory bandwidth its neighbours leave (memory): docs/perf-ci.md.
2. Normalised copies of both files are written (Google Benchmark's format, to --normalised-dir or a
   temporary folder): every real time divided by its own run's real calibration time and every
   CPU time by the CPU one, then multiplied by the baseline's, and given in ns. The baseline copy
   therefore keeps the baseline's own times, and the latest copy holds the latest times as they
   would be on the baseline's machine at the speed it had then: a machine that is uniformly
   slower or busier than the baseline's does not show as a regression. Calibration rows and
   failed rows are left out, names lose Google Benchmark's option suffixes (/min_time:0.100,
   /repeats:3, ...; so changing how long a benchmark runs does not unmatch it), and of the
   aggregates only the median is kept. Counters are copied unchanged (not normalised). The
   copies are named baseline-<program>.normalised.json and latest-<program>.normalised.json
   (.raw-ns.json with --raw), each prefixed by its pair's number when one program has several
   pairs, so that no copy replaces another.
3. Google Benchmark's own comparison tool, compare.py (Debian: libbenchmark-tools, at
   /usr/share/benchmark/compare.py; it needs numpy and scipy, Debian: python3-scipy), is run on the
   two copies and its table printed: per benchmark the relative change of the repetitions' median
   in real and CPU time, the Mann-Whitney U test over the repetitions, and the overall geometric
   mean.
4. The verdict is on each benchmark's own measure, as Google Benchmark defines it: real time for
   a benchmark that uses real or manual time (its name has /real_time or /manual_time), else the
   CPU time of the benchmark's thread. CPU time leaves out the time slices other processes take
   from the core, but not what they take from the caches and memory bandwidth the core shares:
   memory- and cache-bound work gets slower in CPU time too when neighbours run, by more than the
   calibration follows (docs/perf-ci.md, "Thresholds and noise").
   The ratio latest / baseline of the medians of that normalised time is a REGRESSION above
   1 + threshold and an improvement below 1 / (1 + threshold), each only when the Mann-Whitney U
   test over the two runs' normalised repetitions (two-sided, computed here as compare.py's scipy
   computes it) gives p < 0.05: the threshold says the change is large enough to matter, the
   test that the repetitions show it at all. A median past the threshold whose repetitions do not
   differ is counted "not significant" (one NOT SIGNIFICANT line for a slower one) and fails
   nothing. Where there are too few repetitions for the test to reach p < 0.05 at all (its best
   p, for n1 and n2 repetitions that do not overlap, is 2 / C(n1 + n2, n1): 0.1 for 3 and 3, 0.029
   for 4 and 4; a file of aggregates only has none), the threshold alone decides, and that is
   said: a line per pair, "no U test" in the regression line, a count in the summary. One line
   per regression names the program, the benchmark, both normalised times (in calibration
   times), the ratio, the U test and, from the same machine, the raw times. A benchmark that ran
   in the baseline and fails now is a regression too; one that is in the baseline but not run
   now is counted as "not run now", one line each, and fails --fail-on-regression like a
   regression (it may hide one: a benchmark removed on purpose needs a new baseline). A program
   that leaves benchmarks out on this machine names them and why in its context
   (ppbench_not_registered: bubble_fidelity.cpp on too few cores); one NOT REGISTERED line then
   says it.

A pair is a baseline and a latest run of one program: files whose contexts name executables of
different names, or that have no benchmark in common (beside the calibration), are refused (exit
2), since comparing them would compare nothing and pass.

Two runs are of one machine when their contexts agree on cpu_model (ppbench's
benchmarks/bench_context.h), num_cpus and host_name (Google Benchmark's). When one of them
differs, or one run records it and the other does not, the output names each such field with both
values, and only the normalised ratios are compared (raw times from different machines mean
nothing); so it does when neither run records any of them. --raw skips the calibration
(for files made without it, e.g. results/perf/baseline.json of `make perf`) and compares raw
times, which is only meaningful on the baseline's machine.

The last line is the summary (the counts of "not significant" and "without a U test" only where
there are any):
    perf: 34 compared, 1 regressions beyond 15%, 0 improvements, 0 not run now, 2 past the
    threshold but not significant (U test p >= 0.05); ...

Exit status: 0, also with regressions, unless --fail-on-regression is given (then 1 when there is
at least one regression or a benchmark not run now); 0 when a baseline does not exist, after
saying how to make it; 2, in one line, for a bad option (also a --threshold-for PROGRAM that is
none of the programs given), a file that cannot be read or files that are incompatible (no
calibration rows, not Google Benchmark JSON, a time that is not a finite number >= 0, a pair of
two programs or with nothing in common). compare.py missing, or without scipy, is reported and
the verdict still given.

normalize_name is also imported by scripts/compare_torch.py: this module needs the standard library
and scripts/script_cli.py and results_io.py only (which the GPU bundle carries).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from results_io import atomic_write
from script_cli import InputError, OneLineParser, number, output_path, read_json, run

CALIBRATION_PREFIX = "BM_Calibration/"
DEFAULT_CALIBRATION = ("compute",)
DEFAULT_THRESHOLD = 0.15
COMPARE_PY_PATHS = ("/usr/share/benchmark/compare.py",)

# Path components Google Benchmark appends for run options, not identity.
_OPTION_PART = re.compile(
    r"^(min_time|min_warmup_time|iterations|repeats|threads):[^/]*$"
    r"|^(real_time|manual_time|process_time)$"
)
_REAL_TIME_PART = {"real_time", "manual_time"}

_NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# What makes two runs one machine, whose raw times compare: the CPU model (bench_context.h), the
# number of CPUs and the host (Google Benchmark's). Not mhz_per_cpu: Google Benchmark may read the
# current clock, which moves between runs on one machine; not `runner`: a label the user gives
# (PERF_CI_RUNNER), the host name by default, and one label may name many hosts.
_MACHINE_KEYS = ("cpu_model", "num_cpus", "host_name")
# The context key in which a program names the benchmarks it did not register on this machine,
# and why (bubble_fidelity.cpp with fewer cores than its ranks): said beside them when not run.
NOT_REGISTERED_KEY = "ppbench_not_registered"

# Context keys printed for each run, in this order.
_CONTEXT_KEYS = ("commit", "git_commit", "date", "host_name", "runner", "cpu_model", "num_cpus",
                 "mhz_per_cpu", "load_average", "ppbench_build_type", "perf_mode")


def normalize_name(name: str) -> str:
    return "/".join(p for p in name.split("/") if not _OPTION_PART.match(p))


def is_calibration(name: str) -> bool:
    return name.startswith(CALIBRATION_PREFIX)


@dataclass
class Times:
    """Median real and CPU time of one benchmark's repetitions, in ns, and which of the two is
    the benchmark's own measure."""

    real_ns: float
    cpu_ns: float
    real_measure: bool = False

    def measure(self) -> float:
        return self.real_ns if self.real_measure else self.cpu_ns

    def measure_name(self) -> str:
        return "real time" if self.real_measure else "CPU time"


@dataclass
class Run:
    path: Path
    data: dict
    context: dict
    medians: dict[str, Times] = field(default_factory=dict)  # by normalised name, no calibration
    # Each benchmark's repetitions (iteration rows), for the U test; none in a file of aggregates
    samples: dict[str, list[Times]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    calibration: dict[str, Times] = field(default_factory=dict)
    divide_by: tuple[str, ...] = DEFAULT_CALIBRATION  # which calibration benchmarks

    def calibration_time(self) -> Times | None:
        """Geometric mean over the chosen calibration benchmarks; None when one is missing."""
        chosen = [self.calibration.get(CALIBRATION_PREFIX + n) for n in self.divide_by]
        if not chosen or any(m is None for m in chosen):
            return None
        return Times(geomean([m.real_ns for m in chosen]), geomean([m.cpu_ns for m in chosen]))

    def normalised(self, t: Times) -> float:
        """t's own measure over the calibration's time of the same kind."""
        cal = self.calibration_time()
        if cal is None:  # --raw
            return t.measure()
        return t.measure() / (cal.real_ns if t.real_measure else cal.cpu_ns)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _row_ns(row: dict, key: str, path: Path) -> float:
    """The row's time `key` in ns: a finite number >= 0 (a NaN or infinite time would pass every
    threshold comparison as no change, or as a regression without end)."""
    unit = row.get("time_unit", "ns")
    if not isinstance(unit, str) or unit not in _NS_PER_UNIT:
        raise InputError(f"{path}: {row.get('name')!r} has an unknown time_unit {unit!r} "
                         f"(allowed: {', '.join(_NS_PER_UNIT)})")
    value = row.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InputError(f"{path}: {row.get('name')!r} has no numeric {key}")
    ns = float(value) * _NS_PER_UNIT[unit]
    if not math.isfinite(ns) or ns < 0:
        raise InputError(f"{path}: {row.get('name')!r} has a {key} of {value!r} {unit} "
                         "(allowed: a finite time >= 0)")
    return ns


def _full_name(row: dict, path: Path) -> str:
    """The row's run_name (its name without the aggregate suffix), else its name."""
    full = row.get("run_name") or row["name"]
    if not isinstance(full, str):
        raise InputError(f"{path}: {row['name']!r} has a run_name that is not a string: {full!r}")
    return full


def load(path: Path) -> Run:
    """Reads one Google Benchmark JSON file; its medians by normalised name.

    Repetitions are reduced to the median of their iteration rows; a file written with
    --benchmark_report_aggregates_only has none, and its "median" aggregate row is used instead
    (the "mean" one when there is no median).
    """
    data = read_json(path, "cannot read", expect=None)
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"{path} is not Google Benchmark JSON (no 'benchmarks' list)")
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    run = Run(path, data, context)

    iterations: dict[str, list[Times]] = {}
    aggregates: dict[str, dict[str, Times]] = {}
    real_measure: dict[str, bool] = {}
    for row in data["benchmarks"]:
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise InputError(f"{path}: a benchmark row without a name")
        full = _full_name(row, path)
        name = normalize_name(full)
        if row.get("error_occurred"):
            run.errors[name] = str(row.get("error_message") or "error")
            continue
        real_measure[name] = bool(_REAL_TIME_PART & set(full.split("/")))
        is_aggregate = row.get("run_type", "iteration") == "aggregate"
        if is_aggregate and row.get("aggregate_name") not in ("median", "mean"):
            continue  # stddev and cv are not times this compares (and may be 0 or NaN)
        sample = Times(_row_ns(row, "real_time", path), _row_ns(row, "cpu_time", path))
        if is_aggregate:
            aggregates.setdefault(name, {})[str(row.get("aggregate_name"))] = sample
        else:
            iterations.setdefault(name, []).append(sample)

    for name in set(iterations) | set(aggregates):
        if name in run.errors:
            continue
        if name in iterations:
            rows = iterations[name]
            m = Times(statistics.median(r.real_ns for r in rows),
                      statistics.median(r.cpu_ns for r in rows))
            for r in rows:
                r.real_measure = real_measure[name]
            if not is_calibration(name):
                run.samples[name] = rows
        else:
            agg = aggregates[name]
            m = agg.get("median") or agg.get("mean")
            if m is None:
                continue
        m.real_measure = real_measure[name]
        if m.real_ns <= 0 or m.cpu_ns <= 0:
            raise InputError(f"{path}: {name!r} has a time of 0 (real {m.real_ns} ns, "
                             f"CPU {m.cpu_ns} ns)")
        (run.calibration if is_calibration(name) else run.medians)[name] = m
    return run


def normalised_copy(run: Run, real_factor: float, cpu_factor: float) -> dict:
    """The run's JSON with every real / CPU time in ns multiplied by the factors.

    Kept: the repetitions (compare.py's U test uses them) and the "median" aggregate, which is
    what the verdict compares; the mean, stddev and cv aggregates are left out (compare.py would
    print each as one more line, the cv as 0). Calibration rows and failed rows are left out too;
    names lose their option suffixes.
    """
    rows = []
    for row in run.data["benchmarks"]:
        base = normalize_name(_full_name(row, run.path))
        if row.get("error_occurred") or is_calibration(base):
            continue
        is_aggregate = row.get("run_type") == "aggregate"
        if is_aggregate and row.get("aggregate_name") != "median":
            continue
        out = dict(row)
        out["run_name"] = base
        out["name"] = f"{base}_median" if is_aggregate else base
        out["real_time"] = _row_ns(row, "real_time", run.path) * real_factor
        out["cpu_time"] = _row_ns(row, "cpu_time", run.path) * cpu_factor
        out["time_unit"] = "ns"
        rows.append(out)
    return {"context": dict(run.context), "benchmarks": rows}


# ---- compare.py -------------------------------------------------------------------------------


def find_compare_py(given: str | None) -> Path | None:
    if given:
        return Path(given)
    env = os.environ.get("PPBENCH_COMPARE_PY")
    if env:
        return Path(env)
    for p in COMPARE_PY_PATHS:
        if Path(p).is_file():
            return Path(p)
    found = shutil.which("compare.py")
    return Path(found) if found else None


def python_with_scipy(given: str | None) -> str | None:
    """An interpreter that can import what compare.py imports (numpy, scipy).

    The project's .venv has numpy but not scipy; Debian's python3-scipy is for /usr/bin/python3.
    """
    given = given or os.environ.get("PPBENCH_COMPARE_PYTHON")
    if given:
        return given
    seen = set()
    for py in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if not py or py in seen or not Path(py).exists():
            continue
        seen.add(py)
        probe = subprocess.run([py, "-c", "import numpy, scipy.stats"], capture_output=True,
                               check=False)
        if probe.returncode == 0:
            return py
    return None


def run_compare_py(compare_py: Path, python: str, base: Path, latest: Path,
                   aggregates_only: bool) -> None:
    cmd = [python, str(compare_py)]
    if not sys.stdout.isatty():
        cmd.append("--no-color")
    if aggregates_only:
        cmd.append("-a")
    cmd += ["benchmarks", str(base), str(latest)]
    print("$ " + " ".join(cmd))
    print("(Google Benchmark's compare.py. Time, CPU: relative change of the normalised real and "
          "CPU time, +0.10 = 10% slower; _pvalue: U test over the repetitions; Old/New: "
          "normalised ns)", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stdout.write(proc.stderr)
        print(f"perf: compare.py exited {proc.returncode}; the verdict below is "
              "compare_perf.py's own")
    sys.stdout.flush()


# ---- the U test ---------------------------------------------------------------------------------

# compare.py's utest_alpha: a difference counts only where the repetitions differ at this level.
ALPHA = 0.05


def _ranks(values: list[float]) -> list[float]:
    """1-based ranks, tied values sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in order[i:j + 1]:
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _u_counts(n1: int, n2: int) -> list[int]:
    """How many of the comb(n1 + n2, n1) orderings of two samples without ties give U = 0, 1,
    ..., n1 * n2: the coefficients of the Gaussian binomial [n1 + n2 choose n1], built as the
    product over i = 1..n1 of (1 - q^(n2 + i)) / (1 - q^i)."""
    top = n1 * n2
    poly = [1] + [0] * top
    for i in range(1, n1 + 1):
        for k in range(top, n2 + i - 1, -1):  # times (1 - q^(n2 + i))
            poly[k] -= poly[k - n2 - i]
        for k in range(i, top + 1):  # divided by (1 - q^i), exactly
            poly[k] += poly[k - i]
    return poly


def mann_whitney_p(x: list[float], y: list[float]) -> float:
    """The two-sided p-value of the Mann-Whitney U test, as compare.py gets it
    (scipy.stats.mannwhitneyu(x, y, alternative="two-sided"), scipy >= 1.7): the exact
    distribution when one sample has at most 8 values and no value repeats, else the normal
    approximation with the tie and continuity corrections. Standard library only, so the verdict
    needs no scipy (compare.py's table may be missing)."""
    n1, n2 = len(x), len(y)
    both = list(x) + list(y)
    ranks = _ranks(both)
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    if min(n1, n2) <= 8 and len(set(both)) == len(both):
        counts = _u_counts(n1, n2)
        p = 2 * sum(counts[math.ceil(u - 1e-9):]) / math.comb(n1 + n2, n1)
    else:
        n = n1 + n2
        ties = sum(t ** 3 - t for t in (both.count(v) for v in set(both)))
        sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
        if sigma == 0:  # every value the same: nothing tells the samples apart
            return 1.0
        z = (u - n1 * n2 / 2 - 0.5) / sigma
        p = math.erfc(z / math.sqrt(2))  # 2 * the normal distribution's upper tail at z
    return min(1.0, max(0.0, p))


def u_test_possible(n1: int, n2: int) -> bool:
    """Whether samples of n1 and n2 repetitions can differ significantly at all: the smallest
    two-sided p the test gives, for two samples that do not overlap, is 2 / comb(n1 + n2, n1)
    (0.1 for 3 and 3, 0.029 for 4 and 4). Below that the test cannot reject anything, and
    requiring it would turn every regression into "not significant"."""
    return n1 > 0 and n2 > 0 and 2 / math.comb(n1 + n2, n1) < ALPHA


# ---- the verdict --------------------------------------------------------------------------------


def fmt_ns(ns: float) -> str:
    for unit in ("s", "ms", "us"):
        if ns >= _NS_PER_UNIT[unit]:
            return f"{ns / _NS_PER_UNIT[unit]:.4g} {unit}"
    return f"{ns:.4g} ns"


def pct(x: float) -> str:
    return f"{x * 100:g}%"


@dataclass
class Tally:
    compared: int = 0
    regressions: int = 0
    improvements: int = 0
    not_run: int = 0  # in the baseline, not in the latest run
    not_significant: int = 0  # past the threshold, but the U test finds no difference
    untested: int = 0  # too few repetitions for the U test: the threshold alone decides
    # one per regression, not run or slower but not significant, at the end
    lines: list[str] = field(default_factory=list)

    def failed(self) -> bool:
        """What --fail-on-regression fails on: a benchmark that no longer runs may hide a
        regression as well as a slower one shows it."""
        return bool(self.regressions or self.not_run)


def label(run: Run) -> str:
    ctx = run.context
    shown = ", ".join(f"{k}={ctx[k]}" for k in _CONTEXT_KEYS if k in ctx)
    if "load_avg" in ctx and "load_average" not in ctx:
        shown += f", load_avg={ctx['load_avg']}"
    return shown or "(no context)"


def executable_name(run: Run) -> str | None:
    """The file name of the program that wrote the run (Google Benchmark's context
    `executable`), None when the context does not say."""
    exe = run.context.get("executable")
    return Path(exe).name if isinstance(exe, str) and exe else None


def program_of(run: Run) -> str:
    return executable_name(run) or re.sub(r"^(baseline|latest)-", "", run.path.stem)


def benchmark_names(run: Run) -> set[str]:
    """The run's benchmarks but the calibration, failed ones included."""
    return set(run.medians) | set(run.errors)


def check_pair(base: Run, latest: Run) -> None:
    """Refuses a pair that would compare nothing and pass: runs of two programs, or runs with no
    benchmark in common (arguments in the wrong order, a baseline of another program)."""
    exes = (executable_name(base), executable_name(latest))
    both = (f"{base.path} (executable {exes[0] or 'not in its context'}) and {latest.path} "
            f"(executable {exes[1] or 'not in its context'})")
    if None not in exes and exes[0] != exes[1]:
        raise InputError(f"{both} are runs of two programs (allowed: a baseline and a latest run "
                         "of the same program)")
    ours, theirs = benchmark_names(base), benchmark_names(latest)
    if ours and theirs and not ours & theirs:
        raise InputError(f"{both} have no benchmark in common beside the calibration, so nothing "
                         "would be compared (allowed: a baseline and a latest run of the same "
                         "program's benchmarks)")


def check_thresholds(thresholds: dict[str, float], programs: list[str]) -> None:
    """A --threshold-for that matches no program given would be claimed in the summary and
    applied to nothing (a misspelt name would leave the default in force unseen)."""
    unknown = sorted(set(thresholds) - set(programs))
    if unknown:
        raise InputError(f"--threshold-for names {', '.join(unknown)}, which is none of the "
                         f"programs given (allowed: {', '.join(sorted(set(programs)))})")


def copy_names(pairs: list[tuple[Run, Run]], raw: bool) -> list[tuple[str, str]]:
    """The file names of each pair's two normalised copies, distinct across all pairs: named by
    the file names alone, a/x.json and b/x.json would share one copy, and compare.py would then
    compare the latest run with itself."""
    suffix = ".raw-ns.json" if raw else ".normalised.json"
    programs = [program_of(latest) for _, latest in pairs]
    numbered = len(set(programs)) < len(programs)
    names = []
    for i, program in enumerate(programs, 1):
        prefix = f"{i}-" if numbered else ""
        names.append((f"{prefix}baseline-{program}{suffix}", f"{prefix}latest-{program}{suffix}"))
    return names


def check_copies_spare_inputs(targets: list[Path], inputs: list[Path]) -> None:
    """Checked before anything is written: a copy must not replace a file being compared."""
    given = {p.resolve() for p in inputs}
    for target in targets:
        if target.resolve() in given:
            raise InputError(f"--normalised-dir would overwrite {target}, one of the files "
                             "compared (allowed: a folder without them)")


def machine_differences(base: dict, latest: dict) -> list[str]:
    """Each _MACHINE_KEYS field in which two contexts differ, as "field X, now Y". A field that
    one run records and the other does not differs (nothing shows it to be the same); one that
    neither records says nothing."""
    return [f"{k} {base.get(k, 'not recorded')!r}, now {latest.get(k, 'not recorded')!r}"
            for k in _MACHINE_KEYS if base.get(k) != latest.get(k)]


def print_pair_header(base: Run, latest: Run, program: str, threshold: float,
                      raw: bool) -> bool:
    """The pair's title, both contexts and what differs between the machines; True when both
    runs are from the same machine (machine_differences finds nothing)."""
    print(f"== {program}: {base.path} -> {latest.path} (threshold {pct(threshold)})")
    print(f"baseline: {label(base)}")
    print(f"latest:   {label(latest)}")
    differences = machine_differences(base.context, latest.context)
    known = any(k in base.context for k in _MACHINE_KEYS)
    consequence = ("raw times are not comparable" if raw else
                   "only the calibration-normalised ratios are compared, raw times are not")
    if differences:
        print(f"NOTE: the baseline is from another machine ({'; '.join(differences)}): "
              + consequence)
    elif not known:
        print(f"NOTE: neither run records {', '.join(_MACHINE_KEYS)}, so they may be from two "
              "machines: " + consequence)
    for which, one in (("baseline", base), ("latest", latest)):
        if str(one.context.get("ppbench_build_type", "release")).startswith("debug"):
            print(f"WARNING: the {which} run is a debug build")
    return known and not differences


def normalisation_factors(base: Run, latest: Run,
                          calibration: tuple[str, ...]) -> tuple[float, float]:
    """The factors (real, CPU) that put the latest run's times on the baseline's calibration,
    after printing both calibrations."""
    cb, cl = base.calibration_time(), latest.calibration_time()
    assert cb is not None and cl is not None  # checked by main
    parts = ", ".join(
        f"{n.removeprefix(CALIBRATION_PREFIX)} {fmt_ns(base.calibration[n].real_ns)} -> "
        f"{fmt_ns(latest.calibration[n].real_ns)}"
        for n in sorted(base.calibration) if n in latest.calibration)
    chosen = " x ".join(CALIBRATION_PREFIX + n for n in calibration)
    print(f"calibration ({'geometric mean of ' if len(calibration) > 1 else ''}"
          f"{chosen}, median): real time {fmt_ns(cb.real_ns)} -> {fmt_ns(cl.real_ns)} "
          f"(x{cl.real_ns / cb.real_ns:.3f}), CPU time {fmt_ns(cb.cpu_ns)} -> "
          f"{fmt_ns(cl.cpu_ns)} (x{cl.cpu_ns / cb.cpu_ns:.3f}): every time is divided by "
          f"its run's. All calibration benchmarks, real time: {parts}")
    return cb.real_ns / cl.real_ns, cb.cpu_ns / cl.cpu_ns


def write_copies(base: Run, latest: Run, factors: tuple[float, float], targets: tuple[Path, Path],
                 raw: bool) -> list[dict]:
    """Writes the normalised copies of both runs to `targets`; returns them."""
    copies = []
    for (one, rf, cf), target in zip(((base, 1.0, 1.0), (latest, *factors)), targets):
        copy = normalised_copy(one, rf, cf)
        copy["context"]["ppbench_normalised"] = (
            "times in ns, raw" if raw else
            "times in ns, divided by this run's calibration time and multiplied by the "
            f"baseline's (x{rf:.4g} real, x{cf:.4g} CPU)")
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, json.dumps(copy, indent=1) + "\n")
        copies.append(copy)
    return copies


def compare_pair(base: Run, latest: Run, args: argparse.Namespace, tally: Tally,
                 compare_py: Path | None, python: str | None, targets: tuple[Path, Path]) -> None:
    program = program_of(latest)
    threshold = args.thresholds.get(program, args.threshold)
    same_machine = print_pair_header(base, latest, program, threshold, args.raw)
    factors = (1.0, 1.0) if args.raw else normalisation_factors(base, latest, args.calibration)

    # Normalised copies, then Google Benchmark's compare.py on them.
    copies = write_copies(base, latest, factors, targets, args.raw)
    if compare_py is not None and python is not None:
        has_aggregates = all(any(r.get("run_type") == "aggregate" for r in c["benchmarks"])
                             for c in copies)
        run_compare_py(compare_py, python, targets[0], targets[1], has_aggregates)

    in_base, in_latest = benchmark_names(base), benchmark_names(latest)
    names = sorted(in_base | in_latest)
    new = [n for n in names if n not in in_base]
    gone = [n for n in names if n not in in_latest]
    if new:
        print(f"not in the baseline (new, not compared): {', '.join(new)}")
    if gone:
        print(f"in the baseline but not run now (not compared): {', '.join(gone)}")
        tally.not_run += len(gone)
        tally.lines += [f"NOT RUN NOW {program} {n}: in {base.path}, not in {latest.path}"
                        for n in gone]
        why = latest.context.get(NOT_REGISTERED_KEY)
        if why:
            line = f"NOT REGISTERED {program}: {why} (said by {latest.path})"
            print(line)
            tally.lines.append(line)
    fallback_table = compare_py is None or python is None
    if fallback_table:
        width = max([len(n) for n in names] + [9])
        print(f"{'benchmark':<{width}}  {'measure':>9}  {'baseline':>10}  {'latest':>10}  "
              f"{'ratio':>7}  {'U test p':>8}   "
              f"({'raw ns' if args.raw else 'calibration times'}, medians)")
    untested: list[tuple[str, int, int]] = []  # benchmark, repetitions in baseline and latest
    for name in names:
        if name in new or name in gone:
            continue
        if name in base.errors:
            note = "still fails" if name in latest.errors else "ran now, failed in the baseline"
            print(f"{name}: not compared ({note})")
            continue
        b = base.medians[name]
        if name in latest.errors:
            tally.compared += 1
            tally.regressions += 1
            tally.lines.append(f"REGRESSION {program} {name}: fails now: {latest.errors[name]}")
            continue
        lt = latest.medians[name]
        b_norm, l_norm = base.normalised(b), latest.normalised(lt)
        ratio = l_norm / b_norm
        tally.compared += 1
        # The threshold says the change is large enough to matter, the U test that the
        # repetitions show it at all (a median can move past the threshold on noise alone).
        # Where there are too few repetitions for the test, the threshold alone decides.
        n_base, n_latest = len(base.samples.get(name, [])), len(latest.samples.get(name, []))
        p = u_test(base, latest, name)
        if p is None:
            untested.append((name, n_base, n_latest))
            tally.untested += 1
            test = f"no U test: {n_base} and {n_latest} repetitions are too few"
        else:
            test = f"U test p={p:.2g} {'<' if p < ALPHA else '>='} {ALPHA:g}"
        past = ratio > 1 + threshold or ratio < 1 / (1 + threshold)
        raw = f"{fmt_ns(b.measure())} -> {fmt_ns(lt.measure())}"
        what = (f"{raw} {lt.measure_name()}" if args.raw else
                f"{b_norm:.4g} -> {l_norm:.4g} calibration times")
        change = f"x{ratio:.3f}, {(ratio - 1) * 100:+.1f}%"
        flag = ""
        if past and p is not None and p >= ALPHA:
            tally.not_significant += 1
            flag = "not significant"
            if ratio > 1 + threshold:
                tally.lines.append(
                    f"NOT SIGNIFICANT {program} {name}: {what} ({change} > {pct(threshold)}, "
                    f"but {test}: the repetitions do not differ, not a regression)")
        elif ratio > 1 + threshold:
            tally.regressions += 1
            flag = "REGRESSION"
            line = f"REGRESSION {program} {name}: {what} ({change} > {pct(threshold)}, {test})"
            if same_machine and not args.raw:
                line += f"; raw {lt.measure_name()} {raw}"
            tally.lines.append(line)
        elif past:
            tally.improvements += 1
            flag = "improved"
        if fallback_table:
            shown_p = "-" if p is None else f"{p:.2g}"
            print(f"{name:<{width}}  {'real' if lt.real_measure else 'CPU':>9}  {b_norm:>10.4g}  "
                  f"{l_norm:>10.4g}  {ratio:>7.3f}  {shown_p:>8}  {flag}")
    if untested:
        fewest = min(untested, key=lambda u: math.comb(u[1] + u[2], u[1]))
        shown = ", ".join(u[0] for u in untested[:5]) + (", ..." if len(untested) > 5 else "")
        print(f"U test: {len(untested)} of the benchmarks compared have too few repetitions for "
              f"it (fewest {fewest[1]} and {fewest[2]}: no p below {ALPHA:g} is possible), so "
              f"the threshold alone decides for them: {shown}")
    print()


def u_test(base: Run, latest: Run, name: str) -> float | None:
    """The U test's p over the two runs' repetitions of `name`, each normalised as its median is
    (compare.py tests the same values, in the normalised copies); None where there are too few
    repetitions for the test to find any difference (u_test_possible)."""
    xs = [base.normalised(t) for t in base.samples.get(name, [])]
    ys = [latest.normalised(t) for t in latest.samples.get(name, [])]
    if not u_test_possible(len(xs), len(ys)):
        return None
    return mann_whitney_p(xs, ys)


def parse_threshold_for(values: list[str], parser: argparse.ArgumentParser) -> dict[str, float]:
    out = {}
    for v in values:
        program, _, t = v.partition("=")
        try:
            out[program] = number(float, 0)(t)
        except argparse.ArgumentTypeError:
            parser.error(f"--threshold-for wants PROGRAM=FRACTION, FRACTION a finite number >= 0, "
                         f"got {v!r}")
        if not program:
            parser.error(f"--threshold-for wants PROGRAM=FRACTION >= 0, got {v!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="perf", description=__doc__.splitlines()[0],
        epilog="See the module docstring (and docs/perf-ci.md) for what is compared and how.")
    parser.add_argument("files", nargs="+", type=Path, metavar="BASELINE LATEST",
                        help="pairs of Google Benchmark JSON files: baseline, then latest run")
    parser.add_argument("--threshold", type=number(float, 0), default=DEFAULT_THRESHOLD,
                        help="relative slowdown of the normalised median beyond which a "
                             "benchmark is a regression, when the U test finds its repetitions "
                             f"differ (default {DEFAULT_THRESHOLD})")
    parser.add_argument("--threshold-for", action="append", default=[], metavar="PROGRAM=T",
                        help="another threshold for one program (the executable's name in the "
                             "JSON context), e.g. executor_overhead=0.5; may be repeated")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when there is a regression or a benchmark of a baseline "
                             "not run now (default: report, exit 0)")
    parser.add_argument("--raw", action="store_true",
                        help="compare raw times, without the calibration (same machine only)")
    parser.add_argument("--calibration", default=",".join(DEFAULT_CALIBRATION),
                        metavar="NAME[,NAME]",
                        help="the BM_Calibration/<NAME> benchmarks to divide by, their geometric "
                             f"mean when several (default {','.join(DEFAULT_CALIBRATION)})")
    parser.add_argument("--normalised-dir", type=Path,
                        help="where the normalised copies go (default: a temporary folder)")
    parser.add_argument("--compare-py", help="Google Benchmark's compare.py (default: "
                        "$PPBENCH_COMPARE_PY, /usr/share/benchmark/compare.py, compare.py on PATH)")
    parser.add_argument("--compare-python", help="the interpreter for compare.py (default: "
                        "$PPBENCH_COMPARE_PYTHON, else the first of this one, /usr/bin/python3 "
                        "and python3 that imports numpy and scipy)")
    parser.add_argument("--no-compare-py", action="store_true",
                        help="do not run compare.py; print compare_perf.py's own table")
    args = parser.parse_args(argv)
    if not args.files or len(args.files) % 2:
        parser.error("files come in pairs: BASELINE LATEST [BASELINE LATEST ...]")
    args.thresholds = parse_threshold_for(args.threshold_for, parser)
    args.calibration = tuple(n.strip() for n in args.calibration.split(",") if n.strip())
    if not args.calibration:
        parser.error("--calibration names at least one BM_Calibration/<NAME> benchmark")

    if args.normalised_dir is not None:
        output_path(args.normalised_dir, "--normalised-dir", folder=True)

    # Read and check every input before printing anything (an InputError is run()'s exit 2).
    pairs: list[tuple[Run, Run]] = []
    missing_baselines = []
    programs = []
    for base_path, latest_path in zip(args.files[::2], args.files[1::2]):
        latest = load(latest_path)
        programs.append(program_of(latest))
        if not base_path.exists():
            missing_baselines.append((base_path, latest_path))
            continue
        base = load(base_path)
        check_pair(base, latest)
        base.divide_by = latest.divide_by = args.calibration
        if args.raw:
            base.calibration.clear()
            latest.calibration.clear()
        else:
            for one in (base, latest):
                cal = one.calibration_time()
                names = ", ".join(CALIBRATION_PREFIX + n for n in args.calibration)
                if cal is None:
                    raise InputError(
                        f"{one.path} has no {names} rows, so its times cannot be "
                        "normalised: re-run it with a current build (make perf-ci, "
                        "make perf-ci-baseline), or compare raw times with --raw")
                if min(cal.real_ns, cal.cpu_ns) < 1:  # a calibration loop takes milliseconds
                    raise InputError(
                        f"{one.path}: the calibration time of {names} is {cal.real_ns:g} ns "
                        f"real, {cal.cpu_ns:g} ns CPU (allowed: >= 1 ns; dividing by it would "
                        "make every ratio meaningless)")
        pairs.append((base, latest))
    check_thresholds(args.thresholds, programs)
    names = copy_names(pairs, args.raw)
    if args.normalised_dir is not None:
        check_copies_spare_inputs([args.normalised_dir / n for pair in names for n in pair],
                                  args.files)

    compare_py = python = None
    if not args.no_compare_py and pairs:
        compare_py = find_compare_py(args.compare_py)
        if compare_py is None or not compare_py.is_file():
            print("perf: Google Benchmark's compare.py not found"
                  f"{f' at {compare_py}' if compare_py else ''} (Debian: apt-get install "
                  "libbenchmark-tools; or --compare-py PATH): compare_perf.py's own table instead")
            compare_py = None
        else:
            python = python_with_scipy(args.compare_python)
            if python is None:
                print("perf: compare.py needs numpy and scipy, which no python3 here imports "
                      "(Debian: apt-get install python3-scipy): compare_perf.py's own table "
                      "instead")

    for base_path, latest_path in missing_baselines:
        print(f"perf: no baseline {base_path} for {latest_path}; make one on the machine (or "
              f"runner type) that CI uses with `make perf-ci-baseline`, or: "
              f"cp {latest_path} {base_path}")

    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="ppbench-perf-") as tmp:
        outdir = args.normalised_dir or Path(tmp)
        for (base, latest), pair_names in zip(pairs, names):
            targets = (outdir / pair_names[0], outdir / pair_names[1])
            compare_pair(base, latest, args, tally, compare_py, python, targets)

    for line in tally.lines:
        print(line)
    limit = pct(args.threshold)
    if args.thresholds:
        per_program = (f"{p}: {pct(t)}" for p, t in sorted(args.thresholds.items()))
        limit += " (" + ", ".join(per_program) + ")"
    how = ("raw times, no calibration" if args.raw else
           "medians of repetitions, each divided by its run's calibration")
    extra = ""
    if tally.not_significant:
        extra += (f", {tally.not_significant} past the threshold but not significant "
                  f"(U test p >= {ALPHA:g})")
    if tally.untested:
        extra += f", {tally.untested} without a U test (too few repetitions: threshold alone)"
    print(f"perf: {tally.compared} compared, {tally.regressions} regressions beyond {limit}, "
          f"{tally.improvements} improvements, {tally.not_run} not run now{extra}; {how}")
    return 1 if tally.failed() and args.fail_on_regression else 0


if __name__ == "__main__":
    sys.exit(run("perf", main))
