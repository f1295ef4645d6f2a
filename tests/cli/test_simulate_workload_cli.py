#!/usr/bin/env python3
"""`ppbench simulate --workload`: per-stage costs from a workload and a device profile, the
bounding stage, activation bytes against --memory-limit-bytes, bad profiles refused in one
line (exit 2), and `run --profile-out` writing a measured profile that simulate reads back.
Run by ctest with the path of the ppbench binary; standard library only."""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

from cli_checks import address_space, one_line_refusal  # this script's directory is on sys.path

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"
WL = ["--workload", "mlp", "--layers", "8", "--width", "64", "-b", "4"]
SIM = ["simulate", "-s", "1f1b", "-d", "4", "-n", "8", *WL]
RATES = {"format": "ppbench-device-profile", "version": 1, "kind": "rates", "name": "slow-gpu",
         "peak_flops": 1e12, "memory_bandwidth": 1e11, "link_bandwidth": 1e10, "link_latency": 2e-6}


def run(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=300)


def write(d, name, obj):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


class SimulateWorkload(unittest.TestCase):
    def test_text_prints_stage_costs_and_bounding_stage(self):
        r = run(*SIM)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("device profile: default-cpu (built-in default", r.stdout)
        self.assertIn("costs per stage in seconds", r.stdout)
        self.assertIn("bounding stage: ", r.stdout)
        self.assertIn("busiest rank: ", r.stdout)
        self.assertIn("peak activation bytes", r.stdout)

    def test_json_fields(self):
        r = run(*SIM, "--format", "json", "--partition", "1,2,4,1")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["time_unit"], "s")
        self.assertEqual(j["device_profile"]["name"], "default-cpu")
        self.assertEqual(j["partition"]["layer_counts"], [1, 2, 4, 1])
        stages = j["stage_costs"]
        self.assertEqual(len(stages), 4)
        for c in stages:
            for k in ("F", "I", "W", "B", "FB"):
                self.assertTrue(math.isfinite(c[k]) and c[k] > 0, (k, c))
            self.assertAlmostEqual(c["B"], c["I"] + c["W"], delta=1e-12 * c["B"])
        self.assertEqual(stages[-1]["comm"], 0)
        self.assertGreater(stages[0]["comm"], 0)
        # Four identical blocks cost twice two of them; that stage bounds the step.
        self.assertAlmostEqual(stages[2]["F"], 2 * stages[1]["F"], delta=1e-9 * stages[2]["F"])
        self.assertEqual(j["bounding_stage"]["stage"], 2)
        fb = max(c["F"] + c["B"] for c in stages)
        self.assertAlmostEqual(j["bounding_stage"]["F_plus_B"], fb, delta=1e-12 * fb)
        busy = [rk["busy"] for rk in j["ranks"]]
        self.assertEqual(j["busiest_rank"]["rank"], busy.index(max(busy)))
        self.assertGreaterEqual(j["makespan"] * (1 + 1e-9), j["busiest_rank"]["busy"])
        # One stage per rank: the bounding stage's rank is the busiest.
        self.assertEqual(j["busiest_rank"]["rank"], 2)
        self.assertEqual(len(j["activation_memory"]["ranks"]), 4)
        self.assertNotIn("costs", j)

    def test_memory_limit_marks_the_ranks_over_it(self):
        r = run(*SIM, "--format", "json")
        peaks = [e["peak_bytes"] for e in json.loads(r.stdout)["activation_memory"]["ranks"]]
        self.assertTrue(all(p > 0 for p in peaks))
        # 1F1B keeps most in flight on rank 0: a limit between the smallest and largest peak.
        limit = int((min(peaks) + max(peaks)) / 2)
        r = run(*SIM, "--format", "json", "--memory-limit-bytes", str(limit))
        self.assertEqual(r.returncode, 0, r.stderr)
        m = json.loads(r.stdout)["activation_memory"]
        self.assertEqual(m["limit_bytes"], limit)
        self.assertEqual(m["over_limit_ranks"], [k for k, p in enumerate(peaks) if p > limit])
        self.assertIn(0, m["over_limit_ranks"])
        r = run(*SIM, "--memory-limit-bytes", str(limit))
        self.assertIn("ranks over --memory-limit-bytes: [0", r.stdout)

    def test_rates_profile_is_used_and_named(self):
        with tempfile.TemporaryDirectory() as d:
            path = write(d, "gpu.json", RATES)
            r = run(*SIM, "--format", "json", "--device-profile", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            self.assertEqual(j["device_profile"]["name"], "slow-gpu")
            self.assertEqual(j["device_profile"]["rates"]["peak_flops"], 1e12)
            default = json.loads(run(*SIM, "--format", "json").stdout)
            self.assertLess(j["makespan"], default["makespan"])  # a faster device

    def test_cost_aware_family_plans_for_the_workload(self):
        j = json.loads(run("simulate", "-s", "zb-1p", "-d", "4", "-n", "8", *WL, "--partition",
                           "1,2,4,1", "--format", "json").stdout)
        c = j["stage_costs"][2]
        self.assertEqual(j["plan"]["F"], 1)
        self.assertAlmostEqual(j["plan"]["I"], c["I"] / c["F"], delta=1e-9)
        self.assertAlmostEqual(j["plan"]["comm"], max(s["comm"] for s in j["stage_costs"]) / c["F"],
                               delta=1e-9)

    def test_two_chains_and_v_shapes_cost_their_chain_position(self):
        j = json.loads(run("simulate", "-s", "chimera", "-d", "4", "-n", "8", *WL, "--format",
                           "json").stdout)
        self.assertEqual(len(j["stage_costs"]), 4)  # 8 schedule stages, 2 chains of 4
        self.assertEqual(j["param_copies"], 2)

    def test_cost_aware_family_and_interleaved(self):
        for args in (["-s", "zb-1p"], ["-s", "interleaved-1f1b", "--chunks", "2"], ["-s", "zb-v"]):
            r = run("simulate", *args, "-d", "2", "-n", "4", *WL, "--format", "json")
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            j = json.loads(r.stdout)
            # One chain: every schedule stage is a partition stage of its own.
            self.assertEqual(len(j["stage_costs"]), j["stages"])

    def test_bad_input_is_one_line_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            cases = [
                (write(d, "a.json", {k: v for k, v in RATES.items() if k != "peak_flops"}),
                 "peak_flops"),
                (write(d, "b.json", {**RATES, "memory_bandwidth": -1}), "memory_bandwidth"),
                (write(d, "c.json", {**RATES, "link_latency": "soon"}), "link_latency"),
                (write(d, "d.json", {**RATES, "kind": "guess"}), "kind"),
                (write(d, "e.json", "{not json"), "not JSON"),
                # A time past the cost model's bound is named by its own key.
                (write(d, "f.json", {"format": "ppbench-device-profile", "version": 1,
                                     "kind": "measured", "time_unit": "s",
                                     "stages": [{"F": 1, "I": 1, "W": 1, "B": 2, "FB": 3,
                                                 "comm": 2e12}]}),
                 "'stages[0].comm' must be at most"),
                # Rates the checks allow, too small for the work: an infinite time is the
                # profile's, named, not an internal error.
                (write(d, "g.json", {**RATES, "peak_flops": 1e-300, "memory_bandwidth": 1e-300,
                                     "link_bandwidth": 1e-300}),
                 "make stage 0's time longer than"),
                (os.path.join(d, "missing.json"), "missing.json"),
            ]
            for path, needle in cases:
                with self.subTest(needle=needle):
                    one_line_refusal(self, run(*SIM, "--device-profile", path), needle)
        one_line_refusal(self, run(*SIM, "--cost", "F=2"), "--cost")
        # A number past double's range is the file's, named, not an internal error.
        with tempfile.TemporaryDirectory() as d:
            for number in ["1e400", "-1e400"]:
                path = write(d, "inf.json", '{"peak_flops": %s}' % number)
                line = one_line_refusal(self, run(*SIM, "--device-profile", path), path)
                self.assertIn(number, line)
                self.assertIn("double's range", line)
        one_line_refusal(self, run(*SIM, "--memory-limit-bytes", "lots"), "--memory-limit-bytes")
        one_line_refusal(self, run("simulate", "-s", "1f1b", "-d", "2", "-n", "4", "--layers", "4"),
                         "--layers needs --workload")
        one_line_refusal(self, run("simulate", "-s", "1f1b", "-d", "2", "-n", "4",
                                   "--device-profile", "x.json"),
                         "--device-profile needs --workload")

    def test_only_a_bounded_regular_file_is_read(self):
        # /dev/zero never ends and a directory is not a file: refused by kind before any read, so
        # under a 512 MiB address space the refusal comes, not bad_alloc (exit 3).
        with tempfile.TemporaryDirectory() as d:
            for path in ["/dev/zero", d]:
                with self.subTest(path=path):
                    r = subprocess.run([PPBENCH, *SIM, "--device-profile", path],
                                       capture_output=True, text=True, timeout=60,
                                       preexec_fn=address_space(512 << 20))
                    line = one_line_refusal(self, r, path)
                    self.assertIn("not a regular file", line)
            # 16 MiB is the bound: one byte past it is refused with both sizes, unread (sparse).
            big = os.path.join(d, "big.json")
            with open(big, "w") as f:
                f.truncate((16 << 20) + 1)
            line = one_line_refusal(self, run(*SIM, "--device-profile", big), big)
            self.assertIn(str((16 << 20) + 1) + " bytes", line)
            self.assertIn("at most 16777216 bytes", line)
            # At the bound the file is read: a valid profile padded with spaces to 16 MiB.
            text = json.dumps(RATES)
            at = write(d, "at.json", text + " " * ((16 << 20) - len(text)))
            self.assertEqual(os.path.getsize(at), 16 << 20)
            r = run(*SIM, "--format", "json", "--device-profile", at)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["device_profile"]["name"], "slow-gpu")


class EagerLimit(unittest.TestCase):
    """--eager-limit: hand-overs past it by rendezvous (the model itself is tested by hand and
    against its rules in tests/schedules/test_rendezvous.cpp)."""

    def simulate(self, *args):
        r = run(*SIM, "--format", "json", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_hand_overs_past_the_limit_go_by_rendezvous(self):
        with tempfile.TemporaryDirectory() as d:
            profile = write(d, "rates.json", RATES)
            eager = self.simulate("--device-profile", profile)
            # Each hand-over is b x width x 4 = 1024 bytes.
            below = self.simulate("--device-profile", profile, "--eager-limit", "1K")
            past = self.simulate("--device-profile", profile, "--eager-limit", "1023")
        self.assertNotIn("hand_overs", eager)
        self.assertEqual(below["hand_overs"]["rendezvous_after_stages"], [])
        self.assertEqual(below["makespan"], eager["makespan"])
        h = past["hand_overs"]
        self.assertEqual(h["eager_limit_bytes"], 1023)
        self.assertEqual(h["handshake_s"], RATES["link_latency"])
        self.assertEqual(h["rendezvous_after_stages"], [0, 1, 2])
        self.assertEqual([c["handover_bytes"] for c in past["stage_costs"][:-1]], [1024] * 3)
        self.assertTrue(all(c["rendezvous"] for c in past["stage_costs"][:-1]))
        # 1F1B's forwards follow each other on the first rank, so its first hand-over waits.
        self.assertGreater(past["makespan"], eager["makespan"])
        text = run(*SIM, "--eager-limit", "1023").stdout
        self.assertIn("hand-overs past 1023 bytes go by rendezvous", text)

    def test_a_measured_profile_gives_its_link_latency(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.json")
            r = run("run", "-s", "1f1b", "-d", "4", "-n", "8", *WL, "--dtype", "f32", "--steps",
                    "1", "--warmup", "0", "--optimizer", "none", "--profile-out", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                prof = json.load(f)
            prof["link_latency"] = 3e-5
            write(d, "p.json", prof)
            j = self.simulate("--device-profile", path, "--eager-limit", "512")
            self.assertEqual(j["hand_overs"]["handshake_s"], 3e-5)
            self.assertEqual(j["device_profile"]["link_latency"], 3e-5)
            prof["link_latency"] = -1
            write(d, "p.json", prof)
            one_line_refusal(self, run(*SIM, "--device-profile", path), "link_latency")

    def test_bad_uses_are_one_line_exit_2(self):
        one_line_refusal(self, run(*SIM, "--eager-limit", "lots"), "--eager-limit")
        one_line_refusal(self, run(*SIM, "--eager-limit", "0"), "--eager-limit")
        one_line_refusal(self, run(*SIM, "--eager-limit", "64K", "--cores", "2"),
                         "--eager-limit does not go with --cores 2")
        one_line_refusal(self, run("simulate", "-s", "1f1b", "-d", "2", "-n", "4",
                                   "--eager-limit", "64K"), "--eager-limit needs --workload")
        # As many cores as ranks is a device per rank: allowed.
        self.assertEqual(run(*SIM, "--eager-limit", "64K", "--cores", "4").returncode, 0)


class MeasuredProfile(unittest.TestCase):
    RUN = ["run", "--workload", "mlp", "--layers", "4", "--width", "256", "-b", "16",
           "-s", "1f1b", "-d", "2", "-n", "4", "--steps", "3", "--warmup", "1"]

    def test_unwritable_profile_is_refused_before_the_run(self):
        one_line_refusal(self, run(*self.RUN, "--profile-out", "/nonexistent-dir/p.json"),
                         "nonexistent-dir")
        one_line_refusal(self, run(*self.RUN, "--profile-out", "-", "--results", "-"),
                         "--profile-out -")

    def test_run_profile_out_round_trip(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cpu.json")
            r = run(*self.RUN, "--format", "json", "--profile-out", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            measured = json.loads(r.stdout)["step_time_s"]
            with open(path) as f:
                prof = json.load(f)
            self.assertEqual(prof["kind"], "measured")
            self.assertEqual(prof["time_unit"], "s")
            self.assertEqual(prof["layer_counts"], [2, 2])
            self.assertIn("git_commit", prof["provenance"])
            for c in prof["stages"]:
                for k in ("F", "I", "W", "B", "FB"):
                    self.assertTrue(math.isfinite(c[k]) and c[k] > 0, (k, c))
            sim = ["simulate", "-s", "1f1b", "-d", "2", "-n", "4", "--workload", "mlp", "--layers",
                   "4", "--width", "256", "-b", "16", "--device-profile", path]
            r = run(*sim, "--format", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            self.assertEqual(j["device_profile"]["kind"], "measured")
            self.assertEqual([c["F"] for c in j["stage_costs"]], [c["F"] for c in prof["stages"]])
            # The run stepped AdamW (the default): each stage's update is in the profile, and the
            # simulation places it after the stage's last backward.
            self.assertTrue(all(c["optimizer"] > 0 for c in prof["stages"]), prof["stages"])
            self.assertEqual([c["optimizer"] for c in j["stage_costs"]],
                             [c["optimizer"] for c in prof["stages"]])
            # The rank threads' send calls across the one boundary, timed, and simulated.
            self.assertGreater(prof["stages"][0]["send"], 0)
            self.assertNotIn("send", prof["stages"][1])
            self.assertEqual(j["stage_costs"][0]["send"], prof["stages"][0]["send"])
            for got, given in zip(j["stage_costs"], prof["stages"]):
                self.assertEqual(got.get("recv"), given.get("recv"))
            none = os.path.join(d, "none.json")
            r = run(*self.RUN, "--optimizer", "none", "--profile-out", none)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(none) as f:
                self.assertNotIn("optimizer", json.load(f)["stages"][0])
            # A loose factor: the measured step also pays thread hand-overs on a shared machine.
            self.assertLess(j["makespan"], 10 * measured)
            self.assertGreater(j["makespan"], measured / 10)
            # The times hold for the workload they were measured on only.
            r = run(*[a if a != "256" else "128" for a in sim])
            one_line_refusal(self, r, "workload_config")
            r = run(*[a if a != "1f1b" else "interleaved-1f1b" for a in sim], "--chunks", "2")
            one_line_refusal(self, r, "measured for 2 stages")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
