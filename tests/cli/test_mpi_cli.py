#!/usr/bin/env python3
"""`mpirun -np P ppbench run --pp D --dp R`: one pipeline rank per process over MPI, R data-parallel
replicas with their gradients all-reduced. Checked, as a user would run it:
  - every schedule family at --pp 2 --dp 2 and at --pp 4 in four processes equals one device over
    all R x N micro-batches (run --check: float64 gradients to 1e-10), its loss equals the same
    step run in threads of one process, and each process holds the memory the model says;
  - --dp-overlap gives the same gradients, and the record's all-reduces sit after each stage's
    last backward;
  - a process killed mid-step ends the job within the watchdog, the lost rank named, no record
    half-written;
  - a schedule file (ppbench's text and PyTorch's CSV) runs across processes and equals one
    device, also where a message sent early is taken last; one whose mailboxes would deadlock is
    refused by every process before any work;
  - bad launches (P != D x R, --dp without mpirun) get one ppbench line and exit 2;
  - --backend cuda across processes (one GPU per process, NCCL bootstrapped over MPI): flags that
    cannot work across processes get one line and exit 2; a node with fewer GPUs than processes
    gets one line, exit 2 ("a GPU count that does not match") or exit 3 where it shows no GPU at
    all (no driver, no device); with two GPUs or more, --pp 2 (and --dp 2 with four) equals one
    device (--check), with --dp-overlap too, else skipped with the reason.
Skipped, with the reason, where mpirun is missing or ppbench was built without MPI.
Run by ctest with the path of the ppbench binary; standard library only."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from cli_checks import one_line_refusal  # the directory of this script is on sys.path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from emulated_nodes import mpirun_options, namespaces_allowed, write_hostfile  # noqa: E402

PPBENCH = sys.argv[1] if len(sys.argv) > 1 else "build/ppbench"
MPIRUN = shutil.which("mpirun")
# OpenMPI refuses root and more processes than cores unless told; CI runs as root on 2 cores.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
WORKLOAD = ["--workload", "mlp", "--layers", "8", "--width", "24", "-b", "2", "--dtype", "f64"]
N = 8


def built_with_mpi():
    r = subprocess.run([PPBENCH, "--version"], capture_output=True, text=True, timeout=60)
    return "MPI: compiled in" in r.stdout


def open_mpi():
    r = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True, timeout=60)
    return "Open MPI" in r.stdout + r.stderr


BENCH_ALLREDUCE_LINK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "benchmarks", "allreduce_link.py")
BENCH_PIPELINE_LINK = os.path.join(os.path.dirname(BENCH_ALLREDUCE_LINK), "pipeline_link.py")


def namespaces() -> set[str]:
    """The network namespaces on this machine, by name (`ip netns list`: 'NAME (id: N)')."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


def network_namespaces_allowed():
    """Whether this machine lets scripts/emulated-nodes.sh make a node's network (root, ip)."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        return False
    name = f"ppbench-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, timeout=30)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    return r.returncode == 0


def families():
    r = subprocess.run([PPBENCH, "list", "--format", "json"], capture_output=True, text=True,
                       timeout=60, check=True)
    return [s["name"] for s in json.loads(r.stdout)["schedules"]]


def run_job(cmd, timeout, env):
    """subprocess.run of an mpirun job; one that outlives `timeout` fails the test with what it
    had printed by then, so that a rare hang says where it stopped."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        def tail(out):
            text = out.decode(errors="replace") if isinstance(out, bytes) else (out or "")
            return text[-3000:] or "(nothing)"

        raise AssertionError(f"{' '.join(map(str, cmd))} did not end in {timeout} s; its stderr "
                             f"so far:\n{tail(e.stderr)}\nits stdout so far:\n{tail(e.stdout)}"
                             ) from None


def mpirun(processes, *args, timeout=300):
    return run_job([MPIRUN, "-np", str(processes), PPBENCH, *args], timeout, ENV)


def threads(*args):
    return subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=300)


def without_launcher():
    """This environment less every variable a launcher sets (harness/launch.cpp reads them)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_COMM_WORLD_", "PMI_", "PMIX_", "SLURM_"))}


def ppbench_lines(text):
    return [line for line in text.splitlines() if line.startswith("ppbench:")]


@unittest.skipIf(MPIRUN is None, "mpirun not found (Debian: openmpi-bin)")
@unittest.skipIf(MPIRUN is not None and not built_with_mpi(), "ppbench built without MPI")
class MultiProcessRun(unittest.TestCase):
    def run_family(self, family, pp, dp, *extra):
        args = ["run", *WORKLOAD, "--schedule", family, "--pp", str(pp), "--dp", str(dp),
                "-n", str(N), "--check", "--format", "json", *extra]
        # The training options (steps, optimizer) go to the one-process reference too.
        training = []
        for flag in ("--steps", "--optimizer", "--lr"):
            if flag in extra:
                training += [flag, extra[extra.index(flag) + 1]]
        reference = threads("run", *WORKLOAD, "--schedule", "gpipe", "--pp", str(pp),
                            "-n", str(N * dp), "--format", "json", *training)
        self.assertEqual(reference.returncode, 0, reference.stderr)
        r = mpirun(pp * dp, *args)
        if r.returncode == 2:
            # A family's own constraint (e.g. N a multiple of D): threads refuse it alike.
            alone = threads(*[a for a in args if a not in ("--dp", str(dp))][:-2] + ["--dp", "1"])
            self.assertEqual(alone.returncode, 2, f"{family}: only the MPI run refused: {r.stderr}")
            return None
        self.assertEqual(r.returncode, 0, f"{family} pp={pp} dp={dp}: {r.stderr}")
        rec = json.loads(r.stdout)
        self.assertTrue(rec["check"]["passed"], f"{family}: {rec['check']}")
        self.assertLessEqual(rec["check"]["max_rel_error"], 1e-10, family)
        self.assertIn(f"over all {N * dp} micro-batches", rec["check"]["reference"])
        # The loss of the R x N micro-batches equals one process's step over all of them.
        self.assertAlmostEqual(rec["loss"], json.loads(reference.stdout)["loss"], delta=1e-12)
        job = rec["data_parallel"]
        self.assertEqual((job["processes"], job["pipeline_ranks"], job["replicas"]),
                         (pp * dp, pp, dp))
        self.assertEqual(rec["launch"]["transport"], "mpi")
        # One node: every process on node 0, numbered there as in the world.
        self.assertEqual(job["nodes"], 1)
        self.assertEqual([(p["node"], p["local_rank"]) for p in job["per_process"]],
                         [(0, w) for w in range(pp * dp)])
        # What each process held, measured, against `ppbench memory`'s model.
        self.assertEqual(len(rec["memory"]["ranks"]), pp, family)
        for rank in rec["memory"]["ranks"]:
            got, want = rank["measured"], rank["model"]
            for k in ("params", "grads", "optimizer", "activations"):
                self.assertEqual(got[k], want[k], f"{family} rank {rank['rank']} {k}")
            self.assertLessEqual(got["comm"], want["comm"], family)
        return rec

    def test_every_family_over_two_replicas_of_two_ranks(self):
        ran = 0
        for family in families():
            with self.subTest(family=family):
                ran += self.run_family(family, 2, 2) is not None
        self.assertGreaterEqual(ran, 12)

    def test_every_family_over_four_processes(self):
        ran = 0
        for family in families():
            with self.subTest(family=family):
                ran += self.run_family(family, 4, 1) is not None
        self.assertGreaterEqual(ran, 12)

    def test_the_record_names_the_mpi_library_and_its_transport_settings(self):
        # What the hand-overs and all-reduces depend on besides the network: the library, and
        # the transport settings given to mpirun (each --mca reaches the processes as OMPI_MCA_).
        r = subprocess.run(
            [MPIRUN, "-np", "2", "--mca", "btl_tcp_eager_limit", "131072", PPBENCH, "run",
             *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "-n", "2", "--format", "json"],
            capture_output=True, text=True, timeout=300, env=ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        launch = json.loads(r.stdout)["launch"]["mpi"]
        if open_mpi():
            self.assertIn("Open MPI", launch["library"])
            self.assertEqual(launch["settings"]["btl_tcp_eager_limit"], "131072")
            # mpirun's own bookkeeping is left out
            self.assertFalse([k for k in launch["settings"] if k.startswith(("orte", "ess"))])
        self.assertRegex(launch["standard"], r"^\d+\.\d+$")

    def test_processes_sharing_cores_are_replayed_on_them(self):
        # One replica of four processes: where they outnumber the cores they may run on, each
        # records its CPU time and the replay runs on those cores, as for rank threads; with a
        # core each, the plain replay.
        # Waits spin before they nap only where each process has a core: mpirun's binding of
        # one core per process counts as that (a process's own mask then holds one CPU).
        cores = len(os.sched_getaffinity(0))
        rec = self.run_family("1f1b", 4, 1, "--optimizer", "sgd")
        self.assertIsNotNone(rec)
        if cores < 4:
            self.assertEqual(rec["predicted"]["cores"], cores)
            self.assertIn(f"on the {cores} core(s) its ranks shared", rec["predicted"]["note"])
            self.assertEqual(rec["launch"]["spin_us"], 0)
        else:
            self.assertIsNone(rec["predicted"]["cores"])
            self.assertEqual(rec["launch"]["spin_us"], 50)
        if cores >= 2:
            rec = self.run_family("1f1b", 2, 1)
            self.assertIsNone(rec["predicted"]["cores"])
            self.assertEqual(rec["launch"]["spin_us"], 50)
        # Two replicas: replica 0 is replayed alone, so with a core per rank (the other replica's
        # processes would take cores it does not see).
        rec = self.run_family("1f1b", 2, 2)
        self.assertIsNotNone(rec)
        self.assertIsNone(rec["predicted"]["cores"])

    def test_receives_that_find_their_tensor_queued_are_told_apart(self):
        # As for threads (test_run_cli.py): rank 0 sends its forwards before rank 1, with seven
        # layers to its one, posts their receives. Which receives those were crosses to process 0
        # with the trace, and the replay charges the consumer their own work.
        r = mpirun(2, "run", *WORKLOAD, "--schedule", "gpipe", "--pp", "2", "-n", str(N),
                   "--partition", "1,7", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        hand_over = json.loads(r.stdout)["predicted"]["hand_over"]
        self.assertGreater(hand_over["receive_s"], 0)
        self.assertGreaterEqual(hand_over["delay_s"], 0)

    def test_overlapped_all_reduce_follows_each_stage_backward(self):
        for family in ("1f1b", "interleaved-1f1b", "zb-v"):
            with self.subTest(family=family):
                extra = ["--chunks", "2"] if family == "interleaved-1f1b" else []
                rec = self.run_family(family, 2, 2, "--dp-overlap", *extra)
                self.assertIsNotNone(rec)
                self.assertTrue(rec["data_parallel"]["overlap"])
                for p in rec["data_parallel"]["per_process"]:
                    self.assertGreater(p["allreduce_bytes"], 0)
                    self.assertGreaterEqual(p["allreduce_s"], 0)

    def test_without_check_each_part_is_counted_where_it_lies(self):
        # No --check: no gradient tensor travels to process 0. Each part's statistics are
        # counted on its home process, Chimera's and DualPipe's second copy summed into it there,
        # and only the numbers gathered; they equal those of the same schedule in one process
        # over the same R x N micro-batches, part by part.
        for family, pp, dp in (("1f1b", 4, 1), ("interleaved-1f1b", 2, 2), ("chimera", 4, 1),
                               ("dualpipe", 2, 2), ("zb-v", 2, 1)):
            with self.subTest(family=family, pp=pp, dp=dp):
                reference = threads("run", *WORKLOAD, "--schedule", family, "--pp", str(pp),
                                    "-n", str(N * dp), "--format", "json")
                self.assertEqual(reference.returncode, 0, reference.stderr)
                r = mpirun(pp * dp, "run", *WORKLOAD, "--schedule", family, "--pp", str(pp),
                           "--dp", str(dp), "-n", str(N), "--format", "json")
                self.assertEqual(r.returncode, 0, r.stderr)
                got = json.loads(r.stdout)["gradients"]["parts"]
                want = json.loads(reference.stdout)["gradients"]["parts"]
                self.assertEqual([p["part"] for p in got], list(range(len(want))))
                for g, w in zip(got, want):
                    self.assertEqual(g["elements"], w["elements"])
                    self.assertGreater(w["norm"], 0)
                    self.assertAlmostEqual(g["norm"], w["norm"], delta=1e-12 * w["norm"])
                    self.assertAlmostEqual(g["sum"], w["sum"], delta=1e-12 * w["norm"])

    def test_two_optimizer_steps_equal_two_steps_on_one_device(self):
        # Chimera keeps two copies of each part on two processes: their gradients meet before
        # the update (MPI_Sendrecv), and the replicas' after the all-reduce.
        for family in ("1f1b", "chimera"):
            for optimizer in ("adamw", "sgd"):
                with self.subTest(family=family, optimizer=optimizer):
                    rec = self.run_family(family, 2, 2, "--steps", "2", "--optimizer", optimizer,
                                          "--lr", "0.05")
                    self.assertEqual(rec["optimizer"]["name"], optimizer)
                    self.assertIn("over all 16 micro-batches", rec["check"]["reference"])

    def test_a_schedule_file_runs_across_processes(self):
        # A researcher's own order, in ppbench's text and in PyTorch's CSV: 1F1B with rank 1's
        # backwards split and every W put off to the end. Two replicas of it equal one device.
        with tempfile.TemporaryDirectory() as tmp:
            text = os.path.join(tmp, "late_w.txt")
            with open(text, "w") as f:
                f.write("rank 0: F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 B0.3\n"
                        "rank 1: F1.0 I1.0 F1.1 I1.1 F1.2 I1.2 F1.3 I1.3 W1.0 W1.1 W1.2 W1.3\n")
            csv = os.path.join(tmp, "late_w.csv")
            shown = threads("show", "--schedule-file", text, "--format", "csv")
            self.assertEqual(shown.returncode, 0, shown.stderr)
            with open(csv, "w") as f:
                f.write(shown.stdout)
            for path in (text, csv):
                with self.subTest(file=os.path.basename(path)):
                    r = mpirun(4, "run", *WORKLOAD, "--schedule-file", path, "--pp", "2", "--dp",
                               "2", "--check", "--format", "json")
                    self.assertEqual(r.returncode, 0, r.stderr)
                    rec = json.loads(r.stdout)
                    self.assertEqual(rec["schedule"], "file:" + os.path.basename(path))
                    self.assertTrue(rec["check"]["passed"], rec["check"])
                    self.assertIn("over all 8 micro-batches", rec["check"]["reference"])
            # Rank 0 sends micro-batch 5 first, which rank 1 takes last: it holds one of the two
            # slots the whole step, and the others pass through the one left, as proven.
            early = os.path.join(tmp, "early.txt")
            with open(early, "w") as f:
                f.write("rank 0: F0.5 F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 F0.4 B0.3 B0.4 B0.5\n"
                        "rank 1: F1.0 B1.0 F1.1 B1.1 F1.2 B1.2 F1.3 B1.3 F1.4 B1.4 F1.5 B1.5\n")
            r = mpirun(2, "run", *WORKLOAD, "--schedule-file", early, "--pp", "2",
                       "--channel-capacity", "2", "--watchdog", "20", "--check", "--format",
                       "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(json.loads(r.stdout)["check"]["passed"])
            # Rank 1 takes the forwards in reverse: one message per mailbox deadlocks it, which
            # every process refuses before any work, naming the capacity that runs it.
            reverse = os.path.join(tmp, "reverse.txt")
            with open(reverse, "w") as f:
                f.write("rank 0: F0.0 F0.1 F0.2 F0.3 B0.0 B0.1 B0.2 B0.3\n"
                        "rank 1: F1.3 F1.2 F1.1 F1.0 B1.3 B1.2 B1.1 B1.0\n")
            r = mpirun(2, "run", *WORKLOAD, "--schedule-file", reverse, "--pp", "2",
                       "--channel-capacity", "1")
            self.assertEqual(r.returncode, 2, r.stderr)
            lines = ppbench_lines(r.stderr)
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn("with channel capacity 1; it runs with a channel capacity of 4", lines[0])
            r = mpirun(2, "run", *WORKLOAD, "--schedule-file", reverse, "--pp", "2", "--check",
                       "--format", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            rec = json.loads(r.stdout)
            self.assertEqual(rec["channel_capacity"], 4)
            self.assertTrue(rec["check"]["passed"], rec["check"])

    def two_nodes(self, *args, agent_env=None, trace=False):
        """`mpirun -np 4` over two Open MPI nodes emulated here (scripts/mpi-local-agent.sh), two
        slots each, TCP between them; ppbench's JSON record, and with `trace` the job's trace.
        `agent_env` sets the agent's PPBENCH_AGENT_* options (own hostnames, a clock ahead)."""
        with tempfile.TemporaryDirectory() as tmp:
            hosts = write_hostfile(os.path.join(tmp, "hosts"),
                                   {"emulated-node-a": 2, "emulated-node-b": 2})
            trace_path = os.path.join(tmp, "trace.json")
            r = run_job(
                [MPIRUN, "-np", "4", *mpirun_options(hosts),
                 PPBENCH, "run", *WORKLOAD, *args, "-n", str(N), "--check", "--format", "json",
                 *(["--trace-out", trace_path] if trace else [])],
                # The agent makes each node's temporary directory under TMPDIR: here, not /tmp.
                120, dict(ENV, TMPDIR=tmp, **(agent_env or {})))
            self.assertEqual(r.returncode, 0, r.stderr)
            rec = json.loads(r.stdout)
            self.assertTrue(rec["check"]["passed"], rec["check"])
            if not trace:
                return rec
            with open(trace_path) as f:
                return rec, json.load(f)

    @unittest.skipIf(MPIRUN is not None and not open_mpi(), "needs Open MPI's launch options")
    def test_two_nodes_on_one_machine(self):
        # Each replica's pipeline on a node of its own, the all-reduce between the nodes; then a
        # 4-rank V-shaped pipeline whose hand-overs cross between the nodes. Both still equal one
        # device over all micro-batches.
        rec = self.two_nodes("--schedule", "1f1b", "--pp", "2", "--dp", "2")
        self.assertIn(f"over all {2 * N} micro-batches", rec["check"]["reference"])
        job = rec["data_parallel"]
        self.assertEqual(job["nodes"], 2)
        self.assertEqual([(p["replica"], p["node"], p["local_rank"]) for p in job["per_process"]],
                         [(0, 0, 0), (0, 0, 1), (1, 1, 0), (1, 1, 1)])
        for p in job["per_process"]:
            self.assertGreater(p["allreduce_bytes"], 0)
        rec = self.two_nodes("--schedule", "dualpipev", "--pp", "4")
        self.assertEqual([(p["pipeline_rank"], p["node"])
                          for p in rec["data_parallel"]["per_process"]],
                         [(0, 0), (1, 0), (2, 1), (3, 1)])

    @unittest.skipIf(MPIRUN is not None and not open_mpi(), "needs Open MPI's launch options")
    @unittest.skipIf(not namespaces_allowed(), "needs unshare --uts --time (util-linux, as root)")
    def test_nodes_whose_clocks_disagree_share_one_timeline(self):
        # Node b under its own hostname with its monotonic clock 1000 s ahead, as two machines'
        # clocks disagree: each process's offset is measured at start-up and removed, so the
        # job's step and its trace lie on process 0's clock. Without that, node b's events would
        # sit 1000 s late and the step would last 1000 s.
        ahead = 1000
        rec, trace = self.two_nodes(
            "--schedule", "1f1b", "--pp", "2", "--dp", "2", trace=True,
            agent_env={"PPBENCH_AGENT_HOSTNAMES": "1",
                       "PPBENCH_AGENT_CLOCKS": f"emulated-node-b={ahead}"})
        job = rec["data_parallel"]
        procs = job["per_process"]
        facts = trace["otherData"]
        self.assertEqual((facts["schedule"], facts["devices"], facts["replicas"],
                          facts["processes"], facts["nodes"]), ("1f1b", 2, 2, 4, 2))
        self.assertEqual([(p["host"], p["node"]) for p in procs],
                         [("emulated-node-a", 0), ("emulated-node-a", 0),
                          ("emulated-node-b", 1), ("emulated-node-b", 1)])
        # Each offset is known to within half its shortest round trip (the record says how
        # much): two events on two processes' clocks are ordered to within the sum of theirs.
        err = [p["clock_offset_uncertainty_s"] * 1e6 + 1 for p in procs]  # us, 1 us of rounding
        self.assertEqual(err[0], 1)
        for p in procs:
            self.assertLess(p["clock_offset_uncertainty_s"], 0.05, p)
            expected = -ahead if p["host"] == "emulated-node-b" else 0
            self.assertAlmostEqual(p["clock_offset_s"], expected,
                                   delta=p["clock_offset_uncertainty_s"] + 1e-6, msg=p)
            # When the process began the last step, on process 0's clock: beside process 0's
            # start, not 1000 s away.
            self.assertLess(abs(p["step_start_s"]), 60, p)
        # The step: from the first action of any process to the last action, all-reduce or
        # update of any, each on its own clock shifted onto process 0's (the trace's zero is
        # process 0's start of the step).
        self.assertLess(job["makespan_s"], 60)
        events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        self.assertTrue(events)
        first = min(e["ts"] for e in events)
        self.assertGreaterEqual(first, -max(err))
        for e in events:
            self.assertLessEqual(e["ts"] + e["dur"], first + job["makespan_s"] * 1e6 + 1, e)
        # A hand-over starts on its sender's clock and ends on its receiver's.
        transfers = [e for e in events if e.get("cat") == "comm"]
        self.assertTrue(transfers)
        for e in transfers:
            self.assertGreaterEqual(e["dur"], -(err[e["args"]["src"]] + err[e["args"]["dst"]]), e)
        # An all-reduce is one collective: the two replicas' all-reduces of a stage, on the two
        # nodes, overlap on the one timeline.
        names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                 if e.get("ph") == "M" and e["name"] == "process_name"}
        allreduce = next(pid for pid, name in names.items() if name == "allreduce")
        spans = {e["tid"]: (e["ts"], e["ts"] + e["dur"]) for e in events if e["pid"] == allreduce}
        for a, b in ((0, 2), (1, 3)):  # processes of the same pipeline rank, replicas 0 and 1
            self.assertLessEqual(spans[a][0], spans[b][1] + err[a] + err[b], spans)
            self.assertLessEqual(spans[b][0], spans[a][1] + err[a] + err[b], spans)

    @unittest.skipIf(MPIRUN is not None and not open_mpi(), "needs Open MPI's launch options")
    @unittest.skipIf(not network_namespaces_allowed(),
                     "needs network namespaces (root, iproute2's ip and tc)")
    def test_replicas_on_nodes_with_a_network_of_their_own(self):
        # benchmarks/allreduce_link.py end to end on two emulated nodes, each in a network
        # namespace of its own behind a 1 Gbit/s link: the processes ran on two nodes, the
        # all-reduce moved the bytes the simulator's ring formula counts, and nothing is left.
        rec = self.link_benchmark(BENCH_ALLREDUCE_LINK, "--replicas", "2", "--widths", "64",
                                  "--repeats", "1", "--steps", "1")
        memory = threads("memory", "--workload", "mlp", "--layers", "8", "--width", "64",
                         "--dtype", "f32", "--schedule", "gpipe", "--devices", "1",
                         "--microbatches", "2", "--format", "json")
        self.assertEqual(memory.returncode, 0, memory.stderr)
        grads = json.loads(memory.stdout)["ranks"][0]["bytes"]["grads"]
        self.assertGreater(rec["link"]["goodput_bytes_per_s"], 0)
        self.assertEqual(rec["link"]["burst_bytes"], 31250)  # the default: 250 us of 1 Gbit/s
        # OpenMPI's own rates over the link, where benchmarks/mpi_duplex is built beside ppbench
        mpi_duplex = os.path.join(os.path.dirname(os.path.abspath(PPBENCH)), "benchmarks",
                                  "mpi_duplex")
        if os.path.exists(mpi_duplex):
            self.assertEqual(sorted(rec["link"]["mpi"]), ["put", "send"])  # by each protocol
            for mpi in rec["link"]["mpi"].values():
                self.assertGreater(mpi["one_way_bytes_per_s"], 0)
                self.assertGreater(mpi["both_ways_bytes_per_s"], 0)
                self.assertTrue(0 < mpi["both_ways_first_share"] <= 1, mpi)
        else:
            self.assertIsNone(rec["link"]["mpi"])
        # OpenMPI's own all-reduce and its ring, each by both of its TCP protocols
        self.assertEqual(sorted((row["algorithm"], row["protocol"]) for row in rec["rows"]),
                         [("default", "put"), ("default", "send"), ("ring", "put"),
                          ("ring", "send")])
        for row in rec["rows"]:
            self.assertEqual(row["runs"][0]["hosts"], ["ppb-node-0", "ppb-node-1"])
            self.assertEqual(row["bytes"], grads)  # every gradient, once
            self.assertGreater(row["measured_s"], 0)
            self.assertGreater(row["predicted_s"], 0)
        self.assertFalse(namespaces() & {"ppb-node-0", "ppb-node-1"})  # its nodes are gone

    @unittest.skipIf(MPIRUN is not None and not open_mpi(), "needs Open MPI's launch options")
    @unittest.skipIf(not network_namespaces_allowed(),
                     "needs network namespaces (root, iproute2's ip and tc)")
    def test_a_pipeline_across_a_link_by_each_setting(self):
        # benchmarks/pipeline_link.py end to end: one pipeline rank on each of two emulated
        # nodes, by each of OpenMPI's ways to carry the hand-overs; the eager setting's limit
        # lies above the hand-over, and nothing is left.
        rec = self.link_benchmark(BENCH_PIPELINE_LINK, "--schedules", "1f1b", "--width", "64",
                                  "-b", "8", "--steps", "1", "--repeats", "1", "--burst", "20000")
        self.assertEqual(rec["hand_over_bytes"], 8 * 64 * 4)
        # The link as measured outside MPI: the bucket it was given, and one hand-over's message.
        self.assertEqual(rec["link"]["burst_bytes"], 20000)
        message = rec["link"]["message"]
        self.assertEqual(message["bytes"], rec["hand_over_bytes"])
        self.assertGreater(message["arrived_s"], 0)
        self.assertGreater(message["send_call_s"], 0)
        # One hand-over of the same size through the transport, by each setting.
        self.assertEqual(sorted(rec["transport"]), ["default", "eager", "send"])
        for probe in rec["transport"].values():
            self.assertEqual(probe["bytes"], rec["hand_over_bytes"])  # 8 x 64 x 4 = 64 x 8 x 4
            self.assertGreater(probe["hand_over_s"], 0)
            self.assertGreater(probe["send_call_s"], 0)
            # Its hand-overs, told apart as the replay tells them apart.
            self.assertEqual(probe["waited"] + probe["queued"], probe["hand_overs"])
            self.assertGreater(probe["waited"], 0)
        eager = rec["settings"]["eager"]
        limits = [int(eager[i + 2]) for i in range(0, len(eager), 3)]
        self.assertEqual(len(limits), 3)
        self.assertTrue(all(limit > rec["hand_over_bytes"] for limit in limits), eager)
        self.assertEqual([row["setting"] for row in rec["rows"]], ["default", "send", "eager"])
        for row in rec["rows"]:
            self.assertEqual(row["runs"][0]["hosts"], ["ppb-node-0", "ppb-node-1"])
            self.assertGreater(row["clock_offset_uncertainty_s"], 0)
            self.assertGreaterEqual(row["step_start_spread_s"], 0)
            self.assertGreater(row["step_s"], 0)
            self.assertGreater(row["hand_over_max_s"], 0)
            self.assertTrue(0 <= row["measured_bubble"] < 1, row)
            # The simulator's step from the run's profile and the link, in the same unit (s).
            self.assertTrue(row["step_s"] / 10 < row["modelled_step_s"] < row["step_s"] * 10, row)
            self.assertTrue(
                row["step_s"] / 10 < row["modelled_step_socket_s"] < row["step_s"] * 10, row)
            self.assertGreater(row["send_call_median_s"], 0)
            self.assertTrue(row["step_s"] / 10 < row["profile_step_s"] < row["step_s"] * 10, row)
            self.assertTrue(
                row["step_s"] / 10 < row["modelled_step_without_send_s"] < row["step_s"] * 10, row)
        self.assertFalse(namespaces() & {"ppb-node-0", "ppb-node-1"})  # its nodes are gone

    def link_benchmark(self, script, *args):
        """The record of a link benchmark run with `args`; skips where the machine cannot (exit
        3: a kernel without tbf, say), with its line."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "record.json")
            r = subprocess.run([sys.executable, script, "--ppbench", PPBENCH, *args, "--out", out],
                               capture_output=True, text=True, timeout=300, env=ENV)
            if r.returncode == 3:
                self.skipTest(r.stderr.strip().splitlines()[-1])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                return json.load(f)

    def test_only_process_0_needs_the_folder_of_its_outputs(self):
        # Process 0 writes the record and the trace; on another node their folder need not
        # exist. Two working folders stand for two nodes (mpirun's MPMD form), the outputs'
        # folder only in process 0's.
        with tempfile.TemporaryDirectory() as tmp:
            home, other = os.path.join(tmp, "node0"), os.path.join(tmp, "node1")
            os.makedirs(os.path.join(home, "out"))
            os.makedirs(other)
            args = [os.path.abspath(PPBENCH), "run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2",
                    "-n", "4",
                    "--results", "out/r.jsonl", "--trace-out", "out/t.json"]
            r = run_job([MPIRUN, "-np", "1", "--wdir", home, *args, ":",
                         "-np", "1", "--wdir", other, *args], 300, ENV)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(home, "out", "r.jsonl")) as f:
                self.assertEqual(json.loads(f.read())["launch"]["processes"], 2)
            self.assertTrue(os.path.isfile(os.path.join(home, "out", "t.json")))
            self.assertEqual(os.listdir(other), [])

    def test_processes_given_different_jobs_are_refused_not_run(self):
        # Each process reads its own --schedule-file (two working folders stand for two nodes).
        # Two valid orders of one shape would swap tensors of the right size without an error,
        # and the step's gradients would be wrong: the job is refused, naming what differs.
        with tempfile.TemporaryDirectory() as tmp:
            orders = {"node0": "rank 0: F0.0 F0.1 F0.2 F0.3 B0.3 B0.2 B0.1 B0.0\n"
                               "rank 1: F1.0 F1.1 F1.2 F1.3 B1.3 B1.2 B1.1 B1.0\n",
                      "node1": "rank 0: F0.0 F0.1 F0.2 F0.3 B0.0 B0.1 B0.2 B0.3\n"
                               "rank 1: F1.0 F1.1 F1.2 F1.3 B1.0 B1.1 B1.2 B1.3\n"}
            for node, text in orders.items():
                os.makedirs(os.path.join(tmp, node))
                with open(os.path.join(tmp, node, "s.txt"), "w") as f:
                    f.write(text)
            args = [os.path.abspath(PPBENCH), "run", *WORKLOAD, "--schedule-file", "s.txt",
                    "--check", "--optimizer", "none"]

            def job(first, second, *extra):
                return run_job([MPIRUN, "-np", "1", "--wdir", os.path.join(tmp, first), *args,
                                *extra, ":", "-np", "1", "--wdir", os.path.join(tmp, second),
                                *args], 300, ENV)

            r = job("node0", "node1")
            self.assertEqual(r.returncode, 2, r.stderr)
            lines = ppbench_lines(r.stderr)
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn("process 1 was given another schedule", lines[0])
            # Another seed on one process: its options differ.
            r = job("node0", "node0", "--seed", "7")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("process 1 was given other options", ppbench_lines(r.stderr)[0])
            # Either order alone, on both processes, is one job and computes the step.
            for node in orders:
                r = job(node, node)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("check: passed", r.stdout)

    def test_a_file_missing_on_one_node_only_is_named_by_that_process(self):
        # Process 0 finds its schedule file and waits in MPI for the others; process 1, on a
        # "node" without the file, fails before MPI starts. Nothing from process 0 says why, so
        # process 1 does, naming itself.
        with tempfile.TemporaryDirectory() as tmp:
            home, other = os.path.join(tmp, "node0"), os.path.join(tmp, "node1")
            os.makedirs(home)
            os.makedirs(other)
            with open(os.path.join(home, "s.txt"), "w") as f:
                f.write("rank 0: F0.0 F0.1 B0.1 B0.0\nrank 1: F1.0 F1.1 B1.1 B1.0\n")
            args = [os.path.abspath(PPBENCH), "run", *WORKLOAD, "--schedule-file", "s.txt"]
            r = run_job([MPIRUN, "-np", "1", "--wdir", home, *args, ":",
                         "-np", "1", "--wdir", other, *args], 300, ENV)
            self.assertEqual(r.returncode, 2, r.stderr)
            lines = ppbench_lines(r.stderr)
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn("process 1: --schedule-file 's.txt': no such file", lines[0])

    def test_a_killed_process_ends_the_job_with_its_rank_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            results = os.path.join(tmp, "r.jsonl")
            watchdog = 5
            job = subprocess.Popen(
                [MPIRUN, "-np", "4", PPBENCH, "run", "--workload", "mlp", "--layers", "8",
                 "--width", "128", "--schedule", "1f1b", "--pp", "4", "-n", "8",
                 "--steps", "1000000", "--watchdog", str(watchdog), "--progress",
                 "--results", results],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
            # Mid-step: once steps are going (process 0's progress lines).
            first = job.stdout.readline()
            while first and not first.startswith("step "):
                first = job.stdout.readline()
            self.assertTrue(first, "no step ever started")
            victim = self.process_of_rank(job.pid, 1)
            os.kill(victim, signal.SIGKILL)
            killed = time.monotonic()
            out, _ = job.communicate(timeout=watchdog + 60)
            job.stdout.close()
            self.assertLess(time.monotonic() - killed, watchdog + 30)
            self.assertNotEqual(job.returncode, 0)
            self.assertRegex(out, r"rank 1\b")
            # Process 0 writes the record only after the last step: nothing was written.
            self.assertFalse(os.path.exists(results), "a record of a killed job was written")

    @staticmethod
    def process_of_rank(mpirun_pid, rank):
        """The pid of the ppbench process mpirun started (as its child) as world rank `rank`."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        parent = int(f.read().rsplit(")", 1)[1].split()[1])
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        env = f.read().split(b"\0")
                except (OSError, ValueError, IndexError):
                    continue
                if parent == mpirun_pid and f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
                    return int(pid)
            time.sleep(0.1)
        raise AssertionError(f"no process of rank {rank} found among mpirun's children")

    def test_a_process_count_that_is_not_pp_times_dp_is_refused(self):
        r = mpirun(3, "run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "--dp", "2", "-n", "4")
        self.assertEqual(r.returncode, 2)
        lines = ppbench_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("mpirun started 3 processes, but --pp 2 x --dp 2 needs 4", lines[0])

    def test_ids_f32_cannot_hold_are_refused_by_one_process_before_any_work(self):
        # Every process refuses the spec alike, before its memory estimate and before any
        # exchange: one line from process 0, exit 2, not four lines or a job ended by MPI_Abort.
        r = mpirun(4, "run", "--workload", "mlp", "--layers", "4", "--width", "2",
                   "--classes", "16777218", "--schedule", "1f1b", "--pp", "2", "--dp", "2",
                   "-n", "4", timeout=120)
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = ppbench_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        for needle in ["--classes 16777218", "--dtype f32", "at most 16777217", "use --dtype f64"]:
            self.assertIn(needle, lines[0])


# --backend cuda across processes is run by ppbench-cuda-mpi beside ppbench (CUDA, MPI and nccl.h
# in one build); its refusals come before any GPU is touched.
GPU_WORKLOAD = ["--workload", "mlp", "--layers", "8", "--width", "64", "-b", "4", "--dtype", "f32"]
CUDA_MPI = os.path.join(os.path.dirname(os.path.abspath(PPBENCH)), "ppbench-cuda-mpi")


def visible_gpus():
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return 0
    return sum(1 for line in r.stdout.splitlines() if line.startswith("GPU "))


@unittest.skipIf(MPIRUN is None, "mpirun not found (Debian: openmpi-bin)")
class CudaAcrossProcesses(unittest.TestCase):
    def cuda(self, processes, *extra, pp=2):
        return mpirun(processes, "run", *GPU_WORKLOAD, "--schedule", "1f1b", "--pp", str(pp),
                      "-n", "4", "--backend", "cuda", *extra, timeout=240)

    @unittest.skipIf(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi is built here")
    def test_a_build_without_the_cuda_mpi_program_says_so(self):
        r = self.cuda(2)
        self.assertEqual(r.returncode, 3, r.stderr)
        lines = ppbench_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("--backend cuda started by OpenMPI as one of several processes", lines[0])

    @unittest.skipUnless(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi not built (no CUDA, MPI "
                         "and nccl.h together)")
    def test_flags_that_cannot_work_across_processes_are_refused(self):
        for extra, words in ((["--virtual-devices", "2"], "--virtual-devices splits one GPU"),
                             (["--gpus", "0,1"], "each process takes the GPU of its local rank"),
                             (["--cuda-graph"], "--cuda-graph runs in one process only")):
            with self.subTest(extra=extra):
                r = self.cuda(2, *extra)
                self.assertEqual(r.returncode, 2, r.stderr)
                lines = ppbench_lines(r.stderr)
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn(words, lines[0])
        r = self.cuda(3)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("mpirun started 3 processes, but --pp 2 x --dp 1 needs 2",
                      ppbench_lines(r.stderr)[0])

    @unittest.skipUnless(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi not built")
    @unittest.skipIf(visible_gpus() >= 2, "this node has a GPU for each of two processes")
    def test_every_optimizer_and_the_overlapped_all_reduce_are_taken_across_processes(self):
        # The optimizer step runs after the NCCL all-reduce, and --dp-overlap starts each stage's
        # all-reduce after its last backward: no flag refuses them. Where the node cannot run the
        # job, the one line says why, and it is not about the flag.
        for extra in (["--optimizer", "none"], ["--optimizer", "sgd"], ["--optimizer", "adamw"],
                      ["--dp", "2", "--dp-overlap"]):
            with self.subTest(extra=extra):
                r = self.cuda(4 if "--dp" in extra else 2, *extra)
                lines = ppbench_lines(r.stderr)
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertNotIn(extra[0], lines[0])
                self.assertNotIn(extra[-1], lines[0])
                self.assertIn(r.returncode, (2, 3), r.stderr)

    @unittest.skipUnless(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi not built")
    @unittest.skipIf(visible_gpus() >= 2, "this node has a GPU for each of two processes")
    def test_fewer_gpus_than_processes_is_one_line_never_a_hang(self):
        r = self.cuda(2)
        lines = ppbench_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        if visible_gpus() == 0:
            # no device at all (or no driver): the machine's problem, as in one process
            self.assertIn(r.returncode, (2, 3), r.stderr)
            self.assertTrue("no CUDA device visible" in lines[0] or
                            "a GPU count that does not match" in lines[0], lines[0])
        else:
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("a GPU count that does not match", lines[0])

    @unittest.skipUnless(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi not built")
    @unittest.skipIf(visible_gpus() < 2, "needs 2 GPUs on this node (one per process)")
    def test_two_gpus_equal_one_device(self):
        r = self.cuda(2, "--optimizer", "none", "--check", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        record = json.loads(r.stdout)
        self.assertTrue(record["check"]["passed"], record["check"])
        self.assertEqual(record["launch"]["processes"], 2)
        self.assertEqual(record["gpu"]["transport"], "NCCL point-to-point")

    @unittest.skipUnless(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi not built")
    @unittest.skipIf(visible_gpus() < 2, "needs 2 GPUs on this node (one per process)")
    def test_without_check_each_part_is_reduced_on_its_gpu(self):
        # No --check: each part's statistics are reduced on the GPU that holds it, Chimera's
        # second copy summed into the first at the part's home; they equal the same step's with
        # the tensors gathered to process 0 (--check), part by part, to f32 summation order.
        for family in ("1f1b", "chimera"):
            with self.subTest(family=family):
                parts = []
                for extra in ([], ["--check"]):
                    r = mpirun(2, "run", *GPU_WORKLOAD, "--schedule", family, "--pp", "2",
                               "-n", "4", "--backend", "cuda", "--optimizer", "none",
                               "--format", "json", *extra, timeout=240)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    parts.append(json.loads(r.stdout)["gradients"]["parts"])
                self.assertEqual(len(parts[0]), 2)
                for got, want in zip(*parts):
                    self.assertEqual(got["elements"], want["elements"])
                    self.assertGreater(want["norm"], 0)
                    self.assertAlmostEqual(got["norm"], want["norm"], delta=1e-5 * want["norm"])
                    self.assertAlmostEqual(got["sum"], want["sum"], delta=1e-5 * want["norm"])

    @unittest.skipUnless(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi not built")
    @unittest.skipIf(visible_gpus() < 2, "needs 2 GPUs on this node (one per process)")
    def test_two_sgd_steps_with_twin_copies_equal_one_device(self):
        # Chimera keeps each part on two ranks: their gradients are summed over NCCL before each
        # copy's update, and the second step's gradients hold the first step's update. SGD, since
        # the reference is the CPU's float64 step: AdamW's first update, about lr * sign(g), turns
        # the f32 rounding of gradients near zero into differences the f32 tolerance would not
        # hold (the one-process GPU runs check AdamW against the GPU itself).
        r = mpirun(2, "run", *GPU_WORKLOAD, "--schedule", "chimera", "--pp", "2", "-n", "4",
                   "--backend", "cuda", "--optimizer", "sgd", "--warmup", "1", "--steps", "1",
                   "--check", "--format", "json", timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr)
        record = json.loads(r.stdout)
        self.assertTrue(record["check"]["passed"], record["check"])
        self.assertEqual(record["optimizer"]["name"], "sgd")
        self.assertEqual(len(record["memory"]["ranks"]), 2)

    @unittest.skipUnless(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi not built")
    @unittest.skipIf(visible_gpus() < 4, "needs 4 GPUs on this node (--pp 2 --dp 2)")
    def test_two_replicas_equal_one_device_over_all_micro_batches(self):
        r = self.cuda(4, "--dp", "2", "--optimizer", "none", "--check", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        record = json.loads(r.stdout)
        self.assertTrue(record["check"]["passed"], record["check"])
        self.assertEqual(record["data_parallel"]["replicas"], 2)
        self.assertEqual(len(record["data_parallel"]["per_process"]), 4)

    @unittest.skipUnless(os.path.exists(CUDA_MPI), "ppbench-cuda-mpi not built")
    @unittest.skipIf(visible_gpus() < 4, "needs 4 GPUs on this node (--pp 2 --dp 2)")
    def test_overlapped_all_reduce_equals_one_device_over_all_micro_batches(self):
        # Each stage's all-reduce starts after its last backward, on a stream of its own, while
        # the rank goes on; the gradients still equal one device's over all 2 x N micro-batches,
        # and the record has one all-reduce per stage, inside the step.
        for family in ("1f1b", "zb-h1"):
            with self.subTest(family=family):
                r = mpirun(4, "run", *GPU_WORKLOAD, "--schedule", family, "--pp", "2", "--dp", "2",
                           "-n", "4", "--backend", "cuda", "--dp-overlap", "--optimizer", "none",
                           "--check", "--format", "json", timeout=240)
                self.assertEqual(r.returncode, 0, r.stderr)
                record = json.loads(r.stdout)
                self.assertTrue(record["check"]["passed"], record["check"])
                self.assertTrue(record["data_parallel"]["overlap"])
                for p in record["data_parallel"]["per_process"]:
                    self.assertGreater(p["allreduce_bytes"], 0)
                    self.assertGreaterEqual(p["allreduce_s"], 0)


class WithoutMpirun(unittest.TestCase):
    def test_dp_needs_an_mpi_launch(self):
        r = threads("run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "--dp", "2", "-n", "4")
        one_line_refusal(self, r, "--dp 2 runs each replica's ranks as separate processes")

    def test_dp_overlap_needs_an_mpi_launch(self):
        r = threads("run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "--dp", "2",
                    "--dp-overlap", "-n", "4")
        line = one_line_refusal(self, r, "start it with mpirun")
        self.assertIn("--dp 2 --dp-overlap", line)

    def test_dp_overlap_needs_two_replicas(self):
        # One replica has no all-reduce to overlap: refused as --dp 1 (given or the default),
        # in a launch of two processes (process 0 of it, the one that says it) as well.
        args = ["run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "-n", "4", "--dp-overlap"]
        launch = dict(without_launcher(), OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="2")
        for extra, env in (([], None), (["--dp", "1"], None), (["--dp", "1"], launch)):
            with self.subTest(extra=extra, launch=env is not None):
                r = subprocess.run([PPBENCH, *args, *extra], capture_output=True, text=True,
                                   timeout=60, env=env)
                line = one_line_refusal(self, r, "--dp-overlap with --dp 1")
                self.assertIn("allowed: --dp-overlap with --dp R, R >= 2", line)

    def test_a_stray_rank_variable_leaves_the_error_line_in_place(self):
        # A process that no launch of several started says its own errors: a rank variable left
        # in a shell (PMI_RANK=1), alone or with a size it does not fit, must not silence the
        # only line. In a consistent launch of two, process 1 leaves it to process 0; under
        # mpirun's variables, if it is still running a moment later (nothing ended it, as
        # mpirun would have once process 0 failed), it says it, naming itself.
        bad = [["run", "-w", "mlp", "--bogus"], ["simulate", "-s", "1f1b", "-d", "4", "-n", "2"]]
        strays = [{"PMI_RANK": "1"}, {"PMI_RANK": "1", "PMI_SIZE": "1"}, {"PMIX_RANK": "1"},
                  {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "1"},
                  {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "2"}]
        for args in bad:
            for stray in strays:
                with self.subTest(args=args, env=stray):
                    r = subprocess.run([PPBENCH, *args], capture_output=True, text=True,
                                       timeout=60, env=dict(without_launcher(), **stray))
                    one_line_refusal(self, r, "ppbench: error: ")
            with self.subTest(args=args, env="process 1 of 2"):
                env = dict(without_launcher(), PMI_RANK="1", PMI_SIZE="2")
                r = subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60,
                                   env=env)
                self.assertEqual((r.returncode, r.stdout, r.stderr), (2, "", ""))
            with self.subTest(args=args, env="process 1 of 2 under mpirun, alone in failing"):
                env = dict(without_launcher(), OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2")
                r = subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60,
                                   env=env)
                one_line_refusal(self, r, "ppbench: error: process 1: ")

    def test_dp_out_of_range_is_refused(self):
        r = threads("run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "--dp", "0", "-n", "4")
        one_line_refusal(self, r, "--dp")

    def test_srun_without_pmi_is_refused_by_its_first_task(self):
        # What srun without --mpi=pmix sets (Slurm 22.05): each task would otherwise run the
        # whole job on its own. Task 0 says why; the others exit 2 quietly.
        args = ["run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "-n", "4"]
        for task in (0, 1):
            env = dict(os.environ, SLURM_PROCID=str(task), SLURM_NTASKS="2",
                       SLURM_STEP_NUM_TASKS="2")
            r = subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60,
                               env=env)
            if task == 0:
                one_line_refusal(self, r, "srun started 2 tasks without PMIx or PMI")
                self.assertIn("srun --mpi=pmix -n P", r.stderr)
            else:
                self.assertEqual((r.returncode, r.stdout, r.stderr), (2, "", ""))
        # A batch script's own environment (no step) is an ordinary run.
        env = dict(os.environ, SLURM_PROCID="0", SLURM_NTASKS="4")
        r = subprocess.run([PPBENCH, *args], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)


@unittest.skipIf(shutil.which("srun") is None or shutil.which("sinfo") is None,
                 "no Slurm here (scripts/slurm-local.sh starts a one-node cluster)")
class UnderSrun(unittest.TestCase):
    """srun --mpi=pmix as the launcher, where a Slurm cluster answers (not on CI)."""

    @classmethod
    def setUpClass(cls):
        if subprocess.run(["sinfo"], capture_output=True, timeout=30).returncode != 0:
            raise unittest.SkipTest("sinfo finds no Slurm controller")

    def srun(self, tasks, *args, pmix=True):
        return subprocess.run(["srun", *(["--mpi=pmix"] if pmix else []), "-O", "-N", "1",
                               "-n", str(tasks), PPBENCH, *args],
                              capture_output=True, text=True, timeout=300)

    def test_two_replicas_equal_one_device(self):
        r = self.srun(4, "run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "--dp", "2",
                      "-n", str(N), "--check", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = json.loads(r.stdout)
        self.assertTrue(rec["check"]["passed"], rec["check"])
        self.assertLessEqual(rec["check"]["max_rel_error"], 1e-10)
        self.assertEqual(rec["launch"]["transport"], "mpi")
        self.assertEqual(rec["data_parallel"]["processes"], 4)

    def test_bad_launches_say_srun(self):
        r = self.srun(3, "run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "--dp", "2",
                      "-n", str(N))
        self.assertEqual(r.returncode, 2)
        lines = ppbench_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("srun started 3 processes, but --pp 2 x --dp 2 needs 4", lines[0])
        r = self.srun(2, "run", *WORKLOAD, "--schedule", "1f1b", "--pp", "2", "-n", str(N),
                      pmix=False)
        self.assertEqual(r.returncode, 2)
        lines = ppbench_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("srun started 2 tasks without PMIx or PMI", lines[0])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
