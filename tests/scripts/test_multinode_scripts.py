"""The scripts that emulate several nodes on one machine, benchmarks/allreduce_link.py,
benchmarks/pipeline_link.py, scripts/emulated-nodes.sh, scripts/mpi-local-agent.sh and
scripts/slurm-local.sh: their refusals of bad arguments (one line, exit 2, before anything is
made or started). tests/cli/test_mpi_cli.py runs the benchmarks for real where network
namespaces are allowed, and srun where a Slurm cluster answers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

BENCH = ROOT / "benchmarks" / "allreduce_link.py"
PIPELINE_BENCH = ROOT / "benchmarks" / "pipeline_link.py"
NODES = ROOT / "scripts" / "emulated-nodes.sh"


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("bench,args,says", [
    (BENCH, ["--replicas", "1"], "each R must be 2 to 16"),
    (BENCH, ["--replicas", "2,x"], "is not a comma-separated list of integers"),
    (BENCH, ["--widths", "8"], "each width must be 16 to 4096"),
    (BENCH, ["--repeats", "0"], "0 is out of range (allowed: >= 1"),
    (BENCH, ["--protocols", "rdma"], "each protocol once, of put, send"),
    (BENCH, ["--protocols", "put,put"], "each protocol once, of put, send"),
    (PIPELINE_BENCH, ["--schedules", "chimera"], "each schedule once, of 1f1b, zb-h1, gpipe"),
    (PIPELINE_BENCH, ["--schedules", "1f1b,1f1b"], "each schedule once, of"),
    (PIPELINE_BENCH, ["--settings", "fast"], "each setting once, of default, send, eager"),
    (PIPELINE_BENCH, ["--width", "8"], "--width 8: must be 16 to 4096"),
    (PIPELINE_BENCH, ["-b", "2000"], "-b 2000: must be 1 to 1024"),
    (PIPELINE_BENCH, ["--repeats", "0"], "0 is out of range (allowed: >= 1"),
    (PIPELINE_BENCH, ["--burst", "100"], "'100': a whole number of bytes, 2048 to 1073741824"),
    (BENCH, ["--burst", "32k"], "'32k': a whole number of bytes, 2048 to"),
])
def test_the_benchmarks_refuse_bad_options_in_one_line(bench, args, says):
    r = run(sys.executable, str(bench), *args)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("bench", [BENCH, PIPELINE_BENCH])
def test_the_benchmarks_need_a_ppbench(bench, tmp_path):
    r = run(sys.executable, str(bench), "--ppbench", str(tmp_path / "missing"))
    assert r.returncode == 2
    assert "no executable ppbench there" in r.stderr


@pytest.mark.parametrize("args,says", [
    ([], "usage: emulated-nodes.sh"),
    (["sideways", "n0"], "unknown action 'sideways' (allowed: up, down)"),
    (["up", "--rate", "1gb", "n0"], "--rate '1gb' is not a rate such as 100mbit"),
    (["up", "--rate"], "--rate needs a value"),
    (["up"], "no node named"),
    (["up", "a b"], "node name 'a b': letters, digits"),
    (["up", "a-name-too-long"], "at most 12 characters"),
    (["up", "n0", "n1", "n0"], "node 'n0' named twice"),
    (["up", "--rate", "1xbit", "n0"], "--rate '1xbit' is not a rate"),
    (["up", "--rate", "gbit", "n0"], "--rate 'gbit' is not a rate"),
    (["up", "--rate", "000mbit", "n0"], "--rate '000mbit': must be above 0"),
    (["up", "--rate", "1000000gbit", "n0"], "at most 6 digits before the unit"),
    (["up", "--burst", "1024", "n0"], "--burst '1024': a whole number of bytes, 2048 to"),
    (["up", "--burst", "08192", "n0"], "--burst '08192': a whole number of bytes"),
])
def test_emulated_nodes_refuse_bad_arguments_in_one_line(args, says):
    r = run(str(NODES), *args)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,says", [
    ([], "usage: slurm-local.sh up|down [DIR]"),
    (["up", "/tmp/a", "extra"], "usage: slurm-local.sh"),
    (["sideways"], "unknown action 'sideways' (allowed: up, down)"),
    (["up", "relative/dir"], "DIR 'relative/dir' must be an absolute path"),
])
def test_the_local_slurm_refuses_bad_arguments_in_one_line(args, says):
    r = run(str(ROOT / "scripts" / "slurm-local.sh"), *args)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("clocks", ["node-b", "node-b=", "node-b=x", "node-b=1234567890", "=5"])
def test_the_agent_refuses_a_bad_clock_entry_in_one_line(clocks):
    r = subprocess.run([str(ROOT / "scripts" / "mpi-local-agent.sh"), "node-b", "true"],
                       capture_output=True, text=True, timeout=60, check=False,
                       env=dict(os.environ, PPBENCH_AGENT_CLOCKS=clocks))
    assert r.returncode == 2, r.stderr
    assert f"PPBENCH_AGENT_CLOCKS entry '{clocks}' is not NAME=SECONDS" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_agent_runs_the_command_it_is_given_for_its_host(tmp_path):
    # As OpenMPI calls it: ssh options, the host, then the daemon's command line as words.
    r = subprocess.run([str(ROOT / "scripts" / "mpi-local-agent.sh"), "-x", "-o", "Opt=1",
                        "node-b", "echo", "ran;", "echo", "here"],
                       capture_output=True, text=True, timeout=60, check=False,
                       env=dict(os.environ, PPBENCH_AGENT_CLOCKS="node-a=5", TMPDIR=str(tmp_path)))
    assert (r.returncode, r.stdout) == (0, "ran\nhere\n"), r.stderr


def test_the_agent_gives_each_node_a_temporary_directory_of_its_own(tmp_path):
    # Open MPI's daemons make their session directories under TMPDIR, named after the machine's
    # hostname and the job: two nodes' daemons sharing one raced each other at start-up.
    def tmpdir_of(host: str) -> str:
        r = subprocess.run([str(ROOT / "scripts" / "mpi-local-agent.sh"), host,
                            'test -d "$TMPDIR" && test -w "$TMPDIR" && echo "$TMPDIR"'],
                           capture_output=True, text=True, timeout=60, check=False,
                           env=dict(os.environ, TMPDIR=str(tmp_path)))
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    a, b = tmpdir_of("node-a"), tmpdir_of("node-b")
    assert a != b
    assert os.path.dirname(a) == os.path.dirname(b) == str(tmp_path)
    assert tmpdir_of("node-a") == a  # the same node the same directory, launch after launch


@pytest.mark.parametrize("script,first", [
    ("emulated-nodes.sh", "Emulated cluster nodes on this machine"),
    ("slurm-local.sh", "A one-node Slurm cluster on this machine"),
    ("fuzz.sh", "Searches ppbench's input parsers"),
])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_shell_scripts_print_their_header_for_help(script, first, flag):
    # before anything else is checked: no root, no build, no argument needed
    r = run(str(ROOT / "scripts" / script), flag)
    assert r.returncode == 0 and r.stdout.startswith(first) and r.stderr == "", r
    assert "Exit" in r.stdout and "#" not in r.stdout.splitlines()[0]
