#!/usr/bin/env python3
"""`ppbench tune`: every candidate's status and predicted step time agree with `ppbench simulate
--workload` run on that candidate alone, the best is the minimum of that exhaustive loop,
candidates over --memory-limit-bytes are excluded with the rank and bytes named, the JSON
structure, bad flags refused in one line (exit 2), as is a space where every candidate is invalid,
the size bound counting v-half's and v-min's generation at its cost, and the progress line.
Run by ctest with the path of the ppbench binary; standard library only."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from cli_checks import one_line_refusal  # the directory of this script is on sys.path

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"
WL = ["--workload", "mlp", "--layers", "8", "--width", "64"]
D = 2
GLOBAL_BATCH = 8  # N in {2, 4, 8}: the divisors of 8 within [D, 8D]
NS = [2, 4, 8]


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=300)


def tune(limit, *extra):
    r = run("tune", *WL, "-d", str(D), "--global-batch", str(GLOBAL_BATCH),
            "--memory-limit-bytes", str(limit), "--format", "json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def key(c):
    return (c["schedule"], c["chunks"], c["microbatches"])


class Tune(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A limit between the smallest and the largest peak, so that both kinds occur.
        everything = tune(1 << 60)
        peaks = sorted(c["max_peak_bytes"] for c in everything["candidates"]
                       if c["status"] == "fits")
        cls.limit = int(peaks[len(peaks) // 2])
        cls.result = tune(cls.limit)

    def exhaustive(self):
        """`simulate --workload` on every candidate, one process each."""
        families = json.loads(run("list", "--format", "json").stdout)["schedules"]
        out = {}
        for fam in families:
            for v in ([1, 2, 3, 4] if fam["uses_chunks"] else [0]):
                for n in NS:
                    args = ["simulate", "-s", fam["name"], "-d", str(D), "-n", str(n), *WL,
                            "-b", str(GLOBAL_BATCH // n), "--memory-limit-bytes",
                            str(self.limit), "--format", "json"]
                    if v:
                        args += ["--chunks", str(v)]
                    r = run(*args)
                    if r.returncode == 2:
                        out[(fam["name"], v, n)] = {"status": "invalid"}
                        continue
                    self.assertEqual(r.returncode, 0, r.stderr)
                    j = json.loads(r.stdout)
                    mem = j["activation_memory"]
                    out[(fam["name"], v, n)] = {
                        "status": "over_memory" if mem["over_limit_ranks"] else "fits",
                        "makespan": j["makespan"],
                        "peak": max(e["peak_bytes"] for e in mem["ranks"])}
        return out

    def test_every_candidate_agrees_with_simulate_and_best_is_the_minimum(self):
        loop = self.exhaustive()
        got = {key(c): c for c in self.result["candidates"]}
        self.assertEqual(set(got), set(loop))
        for k, want in loop.items():
            self.assertEqual(got[k]["status"], want["status"], k)
            if want["status"] != "invalid":
                self.assertEqual(got[k]["makespan"], want["makespan"], k)
                self.assertEqual(got[k]["max_peak_bytes"], want["peak"], k)
        # The fastest, step times compared at 12 significant digits (a sum in another order is a
        # tie), then the smaller peak.
        fits = [(float(f"{w['makespan']:.11e}"), w["peak"], w["makespan"])
                for w in loop.values() if w["status"] == "fits"]
        best = self.result["best"]
        self.assertEqual((best["makespan"], best["max_peak_bytes"]), min(fits)[2:0:-1])
        self.assertEqual(best["rank"], 1)

    def test_over_memory_excluded_with_reason(self):
        over = [c for c in self.result["candidates"] if c["status"] == "over_memory"]
        self.assertTrue(over)
        for c in over:
            self.assertNotIn("rank", c)
            self.assertRegex(c["reason"], r"^over memory: rank \d+ needs .* > limit ")
            self.assertGreater(c["max_peak_bytes"], self.limit)
        for c in self.result["candidates"]:
            if c["status"] == "fits":
                self.assertLessEqual(c["max_peak_bytes"], self.limit)

    def test_json_structure(self):
        j = self.result
        self.assertEqual(j["devices"], D)
        self.assertEqual(j["global_batch"], GLOBAL_BATCH)
        self.assertEqual(j["microbatch_counts"], NS)
        self.assertEqual(j["memory_limit_bytes"], self.limit)
        fits = [c for c in j["candidates"] if c["status"] == "fits"]
        # The fitting ones come first, ranked 1.. by step time, then by peak bytes.
        self.assertEqual([c["rank"] for c in fits], list(range(1, len(fits) + 1)))
        self.assertEqual(j["candidates"][:len(fits)], fits)
        order = [(c["makespan"], c["max_peak_bytes"]) for c in fits]
        self.assertEqual(order, sorted(order))
        for c in j["candidates"]:
            self.assertIn(c["status"], ("fits", "over_memory", "invalid"))
            self.assertEqual(c["microbatch_size"] * c["microbatches"], GLOBAL_BATCH)
            if c["status"] == "invalid":
                self.assertTrue(c["reason"].startswith("invalid: "), c)
            else:
                self.assertEqual(len(c["peak_bytes"]), D)
        self.assertTrue(any(c["status"] == "invalid" for c in j["candidates"]))

    def test_text_top_and_why_the_others_lost(self):
        r = run("tune", *WL, "-d", str(D), "--global-batch", str(GLOBAL_BATCH),
                "--memory-limit-bytes", str(self.limit), "--top", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")  # no progress line for a search this short
        best = self.result["best"]
        lines = r.stdout.splitlines()
        first = next(i for i, l in enumerate(lines) if l.startswith("rank"))
        self.assertEqual(lines[first + 1].split()[:2], ["1", best["schedule"]])
        self.assertTrue(lines[first + 2].split()[0] == "2")
        self.assertFalse(lines[first + 3].strip().startswith("3"))
        self.assertIn("why the others lost:", r.stdout)
        self.assertRegex(r.stdout, r"over memory: [1-9]\d*\n")
        self.assertRegex(r.stdout, r"invalid: [1-9]\d*\n")
        self.assertIn("needs", r.stdout)

    def test_nothing_fits(self):
        j = tune(1)
        self.assertIsNone(j["best"])
        self.assertFalse([c for c in j["candidates"] if c["status"] == "fits"])
        r = run("tune", *WL, "-d", str(D), "--global-batch", str(GLOBAL_BATCH),
                "--memory-limit-bytes", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no candidate fits --memory-limit-bytes 1 B", r.stdout)

    def test_every_candidate_invalid_is_bad_input_not_memory(self):
        # Nothing fits and nothing is over memory: no limit would help, so it is bad input (exit
        # 2) in the first candidate's words with the count, not "no candidate fits" (exit 0).
        def refused(r, reason):
            line = one_line_refusal(self, r, "every one of the 104 candidates is invalid")
            self.assertIn("the first, naive N=2 b=8: ", line)
            self.assertIn(reason, line)
            self.assertNotIn("--memory-limit-bytes", line)
        base = ["tune", "--workload", "mlp", "--width", "64", "-d", "2",
                "--memory-limit-bytes", "1G"]
        refused(run(*base, "--layers", "1"),
                "workload mlp has 1 layers, fewer than the pipeline's 2 stages")
        refused(run(*base, "--layers", "8", "--partition", "3,3,2", "--format", "json"),
                "--partition '3,3,2' has 3 entries but the pipeline has 2 stages")
        ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "results",
                           "reference", "h100_sxm_profile.json")
        with open(ref) as f:
            prof = json.load(f)
        prof.update(name="absurd", peak_flops=1e300, memory_bandwidth=1e300,
                    link_bandwidth=1e-300, link_latency=0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "absurd.json")
            with open(path, "w") as f:
                json.dump(prof, f)
            refused(run(*base, "--layers", "8", "--device-profile", path),
                    "make stage 0's time longer than")
        # Found before any schedule is generated or announced: at D = 256 v-half alone took
        # seconds, and its progress line came before the refusal.
        r = run("tune", "--workload", "mlp", "--layers", "4", "--width", "8", "-d", "256",
                "--memory-limit-bytes", "64M")
        one_line_refusal(self, r, "fewer than the pipeline's 256 stages")
        self.assertNotIn("tune: simulating", r.stderr)

    def test_bound_counts_v_shape_generation_at_its_cost(self):
        # D = 1024, N = 1031 only: v-half's and v-min's generation, sqrt(D)/4 = 8 tasks' worth
        # per task, take the search past the bound (it ran 290 s when they counted as their
        # tasks alone), so it is refused before any work.
        r = run("tune", "--workload", "mlp", "--layers", "2048", "--width", "8", "-d", "1024",
                "--global-batch", "1031", "--memory-limit-bytes", "1G")
        line = one_line_refusal(self, r, "over the bound of 2e+08")
        self.assertIn("v-half and v-min's generation", line)

    def test_progress_names_a_long_candidate_before_it_runs(self):
        # v-half and v-min at D = 256, N = 1031 are each expected to take over a second by the
        # bound's count, so each is named on stderr before it starts, whatever the clock says;
        # every progress line has the same form.
        r = run("tune", "--workload", "mlp", "--layers", "512", "--width", "8", "-d", "256",
                "--global-batch", "1031", "--memory-limit-bytes", "1G")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stderr.splitlines()
        self.assertIn("tune: simulating v-half N=1031 (23 of 26)", lines)
        self.assertIn("tune: simulating v-min N=1031 (24 of 26)", lines)
        for line in lines:
            self.assertRegex(line, r"^tune: simulating [a-z0-9-]+( v=\d)? N=1031 \(\d+ of 26\)$")

    def test_default_global_batch_from_microbatch_size(self):
        tune_default = run("tune", *WL, "-d", "2", "-b", "3", "--memory-limit-bytes", "1G",
                           "--format", "json")
        self.assertEqual(tune_default.returncode, 0, tune_default.stderr)
        j = json.loads(tune_default.stdout)
        self.assertEqual(j["global_batch"], 8 * 2 * 3)  # 8 D b
        self.assertEqual(j["microbatch_counts"], [2, 3, 4, 6, 8, 12, 16])

    def test_measured_profile_costs_only_what_it_measured(self):
        # Measured at b = 1 on 2 stages: only N = 8 (b = 8 / 8) and 2 stages per chain can be
        # costed; everything else is invalid, saying why.
        with tempfile.TemporaryDirectory() as d:
            prof = os.path.join(d, "cpu.json")
            r = run("run", *WL, "-s", "1f1b", "-d", "2", "-n", "4", "--profile-out", prof)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run("tune", *WL, "-d", str(D), "--global-batch", str(GLOBAL_BATCH),
                    "--memory-limit-bytes", "1G", "--device-profile", prof, "--format", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            self.assertEqual(j["device_profile"]["kind"], "measured")
            fits = [c for c in j["candidates"] if c["status"] == "fits"]
            self.assertTrue(fits)
            for c in fits:
                self.assertEqual(c["microbatch_size"], 1, c)
            reasons = [c["reason"] for c in j["candidates"] if c["status"] == "invalid"]
            self.assertTrue(any("was measured with microbatch_size 1, not 4" in x
                                for x in reasons))
            # The profile holds the optimizer's times (run's default AdamW): each fitting
            # candidate's step is what simulate prints for it, updates included.
            for c in fits[:4]:
                args = ["simulate", *WL, "-s", c["schedule"], "-d", str(D), "-n",
                        str(c["microbatches"]), "-b", str(c["microbatch_size"]),
                        "--device-profile", prof, "--format", "json"]
                if c.get("chunks"):
                    args += ["--chunks", str(c["chunks"])]
                s = run(*args)
                self.assertEqual(s.returncode, 0, s.stderr)
                self.assertEqual(json.loads(s.stdout)["makespan"], c["makespan"], c)

    def test_global_batch_builds_the_workload_only_at_sizes_it_uses(self):
        # AmoebaNet refuses a micro-batch of 1 at this image size; with B = 24 on D = 2 every
        # candidate's micro-batch holds 2 or more samples, so the search runs.
        amoeba = ["--workload", "amoebanet", "--layers", "6", "--filters", "16",
                  "--image-size", "32"]
        r = run("tune", *amoeba, "-d", "2", "--global-batch", "24", "--memory-limit-bytes", "1G",
                "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue([c for c in json.loads(r.stdout)["candidates"] if c["status"] == "fits"])
        # A profile measured at b = 4 costs the candidates of b = 4 (B = 8, N = 2) under
        # --global-batch, which cannot be given with -b.
        with tempfile.TemporaryDirectory() as d:
            prof = os.path.join(d, "b4.json")
            r = run("run", *WL, "-s", "1f1b", "-d", "2", "-n", "2", "-b", "4",
                    "--profile-out", prof)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run("tune", *WL, "-d", "2", "--global-batch", "8", "--memory-limit-bytes", "1G",
                    "--device-profile", prof, "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        fits = [c for c in json.loads(r.stdout)["candidates"] if c["status"] == "fits"]
        self.assertTrue(fits)
        self.assertEqual({c["microbatch_size"] for c in fits}, {4})

    def test_bad_flags_refused_in_one_line(self):
        base = ["tune", *WL, "-d", "2", "--memory-limit-bytes", "1G"]
        one_line_refusal(self, run(*base, "--global-batch", "17"), "--global-batch 17")
        one_line_refusal(self, run(*base, "--global-batch", "0"), "0")
        one_line_refusal(self, run(*base, "--top", "0"), "--top")
        one_line_refusal(self, run(*base, "--format", "csv"), "csv")
        one_line_refusal(self, run(*base, "--global-batch", "8", "-b", "2"), "--global-batch")
        one_line_refusal(self, run("tune", *WL, "-d", "2"), "--memory-limit-bytes")
        one_line_refusal(self, run("tune", *WL, "-d", "2", "--memory-limit-bytes", "lots"),
                         "lots")
        one_line_refusal(self, run("tune", "-d", "2", "--memory-limit-bytes", "1G"), "--workload")
        # Every candidate would fail alike: said once, as bad input.
        one_line_refusal(self, run(*base, "--partition", "foo"), "unknown --partition 'foo'")
        one_line_refusal(self, run(*base, "--partition", "1,1"), "sums to 2 layers")
        # The workload of one micro-batch size at a time counts against --max-memory: its spec,
        # and a cut per stage count, beside one spec's worth that
        # simulate --workload would hold (20000 layers: about 32 MB a spec).
        big = ["--workload", "mlp", "--layers", "20000", "--width", "8", "-d", "2",
               "--memory-limit-bytes", "1G", "--max-memory", "120M"]
        one_line_refusal(self, run("tune", *big), "6 specs of 2e+04 layers")
        # A default global batch 8 D b past the bound, not an overflow.
        one_line_refusal(self, run("tune", *WL, "-d", "16", "-b", str(2**57),
                                   "--memory-limit-bytes", "1G"), "--microbatch-size")
        # An absurd space is refused before any work.
        one_line_refusal(self, run("tune", *WL, "-d", "4096", "--global-batch",
                                   str(2**40), "--memory-limit-bytes", "1G"), "over the bound")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
