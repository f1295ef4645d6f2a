#!/usr/bin/env python3
"""`ppbench simulate --dp R [--dp-overlap]`: R data-parallel replicas of the simulated pipeline,
checked against the ring all-reduce's closed form on 1F1B (whose step is (N+D-1)(F+B) with rank r
ending r x B before rank 0), the workload path's gradient bytes, --dp 1 leaving the output as it
was, the Chrome trace's allreduce track, and bad input refused in one line with exit 2.
Run by ctest with the path of the ppbench binary; standard library only."""
import json
import re
import subprocess
import sys
import unittest

from cli_checks import one_line_refusal  # the directory of this script is on sys.path

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"
D, N, F, B = 4, 8, 1.0, 2.0
SIM = ["simulate", "-s", "1f1b", "-d", str(D), "-n", str(N), "--cost", f"F={F},B={B}"]
WL = ["--workload", "mlp", "--layers", "8", "--width", "64", "-b", "4"]


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=300)


def report(*args):
    r = run(*args, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def ring(volume, replicas, bandwidth=1.0, latency=0.0):
    """Ring all-reduce: reduce-scatter + all-gather, 2 (R-1) steps of volume / R each."""
    steps = 2 * (replicas - 1)
    return steps * latency + steps / replicas * volume / bandwidth


class SimulateDataParallel(unittest.TestCase):
    def check_one_f_one_b(self, j, replicas, grad):
        t = ring(grad, replicas)
        step = (N + D - 1) * (F + B)  # one replica's compute
        makespan = step + t  # rank 0 ends last; every rank's all-reduce takes t
        self.assertAlmostEqual(j["makespan"], makespan, delta=1e-12 * makespan)
        busy = N * (F + B)
        self.assertAlmostEqual(j["bubble_fraction"], 1 - busy / makespan, delta=1e-12)
        d = j["data_parallel"]
        self.assertEqual(d["replicas"], replicas)
        self.assertEqual(d["pipeline_ranks"], D)
        self.assertEqual(d["processes"], D * replicas)
        self.assertEqual(d["microbatches_per_step"], replicas * N)
        self.assertAlmostEqual(d["throughput"], replicas * N / makespan, delta=1e-12)
        self.assertAlmostEqual(j["allreduce_time"], t, delta=1e-12)
        self.assertAlmostEqual(j["exposed_allreduce"], t, delta=1e-12)
        for rk in j["ranks"]:
            self.assertAlmostEqual(rk["busy"], busy)
            self.assertAlmostEqual(rk["compute_end"], step - rk["rank"] * B)
            self.assertAlmostEqual(rk["allreduce_time"], t, delta=1e-12)
            self.assertAlmostEqual(rk["exposed_allreduce"], t, delta=1e-12)
            self.assertEqual(rk["allreduce_bytes"], grad)

    def test_end_of_step_matches_the_closed_form(self):
        for replicas, grad in ((2, 3.0), (4, 5.0), (64, 0.5)):
            j = report(*SIM, "--dp", str(replicas), "--grad-units", str(grad))
            self.assertEqual(j["data_parallel"]["allreduce"], "end_of_step")
            self.check_one_f_one_b(j, replicas, grad)

    def test_overlap_with_one_stage_per_rank_is_the_same_step(self):
        # 1F1B's last action on a rank is its stage's last backward: nothing to overlap.
        j = report(*SIM, "--dp", "4", "--grad-units", "5", "--dp-overlap")
        self.assertEqual(j["data_parallel"]["allreduce"], "overlapped")
        self.check_one_f_one_b(j, 4, 5.0)

    def test_overlap_hides_early_stages_of_interleaved(self):
        args = ["simulate", "-s", "interleaved-1f1b", "-d", "4", "-n", "8", "--chunks", "2",
                "--dp", "2", "--grad-units", "1"]
        end, over = report(*args), report(*args, "--dp-overlap")
        self.assertLess(over["makespan"], end["makespan"])
        self.assertLess(over["exposed_allreduce"], end["exposed_allreduce"])
        # Both reduce the same volume per rank (two stages) over the same link.
        self.assertAlmostEqual(over["allreduce_time"], end["allreduce_time"])
        self.assertAlmostEqual(end["allreduce_time"], ring(2.0, 2))

    def test_text_and_csv(self):
        r = run(*SIM, "--dp", "2", "--grad-units", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("R=2 replicas x D=4 ranks = P=8 processes", r.stdout)
        self.assertIn("exposed_allreduce", r.stdout)
        self.assertIn("throughput", r.stdout)
        self.assertIn("closed forms leave out the all-reduce", r.stdout)
        r = run(*SIM, "--dp", "2", "--grad-units", "3", "--format", "csv")
        lines = r.stdout.strip().splitlines()
        self.assertTrue(lines[0].endswith(
            ",replicas,throughput,allreduce_time,allreduce_bytes,exposed_allreduce"))
        self.assertEqual(len(lines), 1 + D)
        self.assertEqual(lines[1].split(",")[-5], "2")

    def test_dp_one_changes_nothing(self):
        for fmt in ("text", "csv"):
            plain = run(*SIM, "--format", fmt)
            one = run(*SIM, "--format", fmt, "--dp", "1")
            self.assertEqual(plain.returncode, 0, plain.stderr)
            self.assertEqual(one.stdout, plain.stdout)
        plain, one = report(*SIM), report(*SIM, "--dp", "1")
        for j in (plain, one):
            j.pop("provenance")
        self.assertEqual(one, plain)
        self.assertNotIn("data_parallel", one)
        self.assertNotIn("allreduce_time", one)
        plain = run(*SIM, "--trace-out", "-")
        one = run(*SIM, "--trace-out", "-", "--dp", "1")
        self.assertEqual(one.stdout, plain.stdout)

    def test_workload_gradient_bytes_and_link(self):
        j = report("simulate", "-s", "1f1b", "-d", "4", "-n", "8", *WL, "--dp", "2",
                   "--dp-bandwidth", "10", "--dp-latency", "5")
        d = j["data_parallel"]
        self.assertEqual(d["volume_unit"], "bytes")
        self.assertEqual(j["partition"]["layer_counts"], [2, 2, 2, 2])
        # mlp width 64: seven 64x64 linear layers (+ bias) and a 64 -> 10 head, f32.
        hidden, head = 64 * 64 + 64, 64 * 10 + 10
        stage_bytes = [4 * 2 * hidden] * 3 + [4 * (hidden + head)]
        self.assertEqual(d["stage_volume"], stage_bytes)
        self.assertEqual(d["link_bandwidth"], 10e9)
        self.assertAlmostEqual(d["link_latency"], 5e-6, delta=1e-18)
        for rk, grad in zip(j["ranks"], stage_bytes):
            t = ring(grad, 2, 10e9, 5e-6)
            self.assertAlmostEqual(rk["allreduce_time"], t, delta=1e-15)
            self.assertEqual(rk["allreduce_bytes"], grad)
        self.assertAlmostEqual(j["makespan"],
                               max(rk["compute_end"] + rk["allreduce_time"] for rk in j["ranks"]),
                               delta=1e-15)
        # The defaults: 25 GB/s and 10 us.
        d = report("simulate", "-s", "1f1b", "-d", "4", "-n", "8", *WL, "--dp", "2")[
            "data_parallel"]
        self.assertEqual((d["link_bandwidth"], d["link_latency"]), (25e9, 1e-5))

    def test_trace_shows_the_allreduces(self):
        r = run(*SIM, "--dp", "2", "--grad-units", "3", "--dp-overlap", "--trace-out", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        events = json.loads(r.stdout)["traceEvents"]
        pid = next(e["pid"] for e in events
                   if e["name"] == "process_name" and e["args"]["name"] == "allreduce")
        ar = [e for e in events if e.get("cat") == "allreduce"]
        self.assertEqual(len(ar), D)
        for e in ar:
            self.assertEqual(e["pid"], pid)
            self.assertAlmostEqual(e["dur"], ring(3.0, 2) * 1e3)  # 1 cost unit = 1 ms
            self.assertEqual(e["name"], f"allreduce {e['tid']}")
            # It starts when the rank's stage's last backward ends: (N+D-1)(F+B) - r x B.
            self.assertAlmostEqual(e["ts"], ((N + D - 1) * (F + B) - e["tid"] * B) * 1e3)

    def test_help_says_the_defaults_and_bounds_the_code_uses(self):
        # The help is written from the constants the flags use: what it says is what happens.
        text = run("simulate", "--help").stdout

        def said(pattern):
            m = re.search(pattern, text, re.S)
            self.assertIsNotNone(m, pattern)
            return m.groups()

        lo, hi, default = map(int, said(r"--dp INT.*?\((\d+) to (\d+); default (\d+)\)"))
        self.assertEqual((lo, default), (1, 1))
        self.assertIn(f"({lo} to {hi}; default {default};", run("run", "--help").stdout)
        self.assertEqual(report(*SIM, "--dp", str(hi), "--grad-units", "1")["data_parallel"]
                         ["replicas"], hi)
        one_line_refusal(self, run(*SIM, "--dp", str(hi + 1), "--grad-units", "1"), str(hi))
        bandwidth, least = said(r"--dp-bandwidth .*?\(default (\S+), a .*?; at least (\S+),")
        (latency,) = said(r"--dp-latency .*?\(default (\S+),")
        (most,) = said(r"--grad-units .*?at most ([^)]+)\)")
        d = report("simulate", "-s", "1f1b", "-d", "4", "-n", "8", *WL, "--dp", "2")[
            "data_parallel"]
        self.assertEqual(d["link_bandwidth"], float(bandwidth) * 1e9)
        self.assertAlmostEqual(d["link_latency"], float(latency) * 1e-6, delta=1e-18)
        wl = ["simulate", "-s", "1f1b", "-d", "4", "-n", "8", *WL, "--dp", "2"]
        self.assertEqual(run(*wl, "--dp-bandwidth", least).returncode, 0)
        one_line_refusal(self, run(*wl, "--dp-bandwidth", repr(float(least) / 2)),
                         "--dp-bandwidth")
        self.assertEqual(run(*SIM, "--dp", "2", "--grad-units", most).returncode, 0)
        one_line_refusal(self, run(*SIM, "--dp", "2", "--grad-units", repr(float(most) * 1.01)),
                         "--grad-units")

    def test_bad_input_is_one_line_and_exit_2(self):
        cases = [
            ([*SIM, "--dp", "0"], "--dp"),
            ([*SIM, "--dp", "65537"], "65537"),
            ([*SIM, "--dp", "two"], "two"),
            ([*SIM, "--dp-overlap"], "--dp-overlap needs --dp"),
            # One replica has no all-reduce to overlap.
            ([*SIM, "--dp", "1", "--dp-overlap"], "--dp-overlap with --dp 1"),
            ([*SIM, "--dp", "1", "--dp-overlap"], "allowed: --dp-overlap with --dp R, R >= 2"),
            ([*SIM, "--grad-units", "2"], "--grad-units needs --dp"),
            ([*SIM, "--dp", "2"], "needs --grad-units"),
            ([*SIM, "--dp", "2", "--grad-units", "-1"], "-1"),
            ([*SIM, "--dp", "2", "--grad-units", "inf"], "inf"),
            ([*SIM, "--dp", "2", "--grad-units", "1", "--dp-bandwidth", "5"],
             "--dp-bandwidth needs --workload"),
            ([*SIM, "--dp", "2", "--grad-units", "1", "--dp-latency", "5"],
             "--dp-latency needs --workload"),
        ]
        wl = ["simulate", "-s", "1f1b", "-d", "4", "-n", "8", *WL, "--dp", "2"]
        cases += [
            ([*wl, "--grad-units", "1"], "--grad-units does not go with --workload"),
            ([*wl, "--dp-bandwidth", "0"], "--dp-bandwidth"),
            ([*wl, "--dp-bandwidth", "1e-320"], "1e-320"),  # an infinite all-reduce
            ([*wl, "--dp-bandwidth", "nan"], "nan"),
            ([*wl, "--dp-bandwidth", "-3"], "-3"),
            ([*wl, "--dp-latency", "-1"], "--dp-latency"),
        ]
        for args, needle in cases:
            with self.subTest(args=args[7:]):
                one_line_refusal(self, run(*args), needle)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
