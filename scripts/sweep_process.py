"""ppbench (and nvidia-smi) as child processes of a sweep.

run_child runs one in a session of its own under stop_signals (SIGINT or SIGTERM ends every
process of the running child, mpirun's ranks included, and raises Stopped, so no record is cut
in half); probe checks that --ppbench runs and says who records (recorded_by);
visible_gpu_count asks nvidia-smi; run_point runs one point and turns its outcome (exit code,
JSON, timeout) into a row.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from results_io import EXIT_INVALID, EXIT_MACHINE, PpbenchError, loads_finite
from script_cli import first_line
from sweep_point import CLOSED_FORM_COST, Point

# What `ppbench --version` prints when it was built with MPI.
MPI_VERSION_LINE = "MPI: compiled in"
CUDA_BESIDE = "(CUDA runs by ppbench-cuda beside it"
NVIDIA_SMI = "nvidia-smi"
# The exit code of a ppbench that runs but fails its probe (results_io has ppbench's own).
EXIT_FAILURE = 1
# The probe: the cheapest point ppbench has.
PROBE_ARGV = ["simulate", "--schedule", "naive", "--devices", "1", "--microbatches", "1",
              "--format", "json"]
PROBE_TIMEOUT = 120.0


# How long a point's processes get to end after SIGTERM (mpirun passes it on to its ranks)
# before whatever is left of the point is SIGKILLed.
TERM_GRACE_S = 5.0
# How often run_child looks whether a stop signal came while it waits for the child.
POLL_S = 0.2
# How long the output of a killed point is still read: a process that left the point's session
# may hold its pipes open, and the sweep must not wait for it.
DRAIN_S = 5.0
# How many times stop_child looks again for processes left in the point's session (one may
# start another while they are being killed).
SESSION_ROUNDS = 20


class Stopped(Exception):
    """Raised where a child process ends because a stop signal came (see run_child)."""


class _Stop:
    """What the signal handlers share with run_child: the signal that came, the running child."""

    signum: int | None = None
    child: subprocess.Popen | None = None


STOP = _Stop()

# The signals that stop a sweep cleanly (stop_signals); the exit is 128 + the signal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _on_signal(signum: int, frame: Any) -> None:
    # Only the first step of stop_child, which run_child takes within POLL_S: waiting out the
    # grace period here would stall the main thread inside a handler.
    STOP.signum = signum
    child = STOP.child
    if child is not None and child.returncode is None:
        signal_group(child.pid, signal.SIGTERM)


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP stop the running child and set STOP.signum instead of raising,
    so that a record is never cut in half; the old handlers come back afterwards. SIGHUP (a
    closed terminal, a batch system) is one of them: left to script_cli's handler it would be
    raised anywhere, between the JSONL append and the CSV update, and the summary would say
    the sweep was not interrupted."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    STOP.signum = None
    old = {s: signal.signal(s, _on_signal) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def run_child(argv: list[str], timeout: float,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess | None:
    """Run argv in a session of its own (env: its environment, None to inherit); None on
    timeout (every process of the point is ended, see stop_child). Raises Stopped when a stop
    signal came while it ran (it is ended the same way), OSError when it cannot start. Its
    output is read as UTF-8, each byte that is not UTF-8 read as U+FFFD: a point that prints
    garbage is that point's error row, never the end of the sweep."""
    if STOP.signum is not None:
        raise Stopped()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            encoding="utf-8", errors="replace", start_new_session=True, env=env)
    STOP.child = proc
    try:
        out, err = wait_child(proc, timeout)
    finally:
        STOP.child = None
        if proc.returncode is None:  # an exception while waiting: leave nothing running
            stop_child(proc)
    if STOP.signum is not None:
        raise Stopped()
    if out is None:
        return None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def wait_child(proc: subprocess.Popen, timeout: float) -> tuple[str | None, str | None]:
    """The child's (stdout, stderr) once it has ended; (None, None) where it ran past timeout
    or a stop signal came, after stop_child ended it."""
    deadline = time.monotonic() + timeout
    while True:
        # Looked at before the first wait too: a signal that came after run_child's own look
        # but before STOP.child was set found no child to stop, and would leave it running
        # until its timeout.
        left = deadline - time.monotonic()
        if STOP.signum is not None or left <= 0:
            stop_child(proc)
            return None, None
        try:
            out, err = proc.communicate(timeout=min(left, POLL_S))
        except subprocess.TimeoutExpired:
            continue  # communicate keeps what it read so far for the next call
        if STOP.signum is not None:
            # The handler's SIGTERM ended the child, but what it started in process groups of
            # their own may still run.
            stop_child(proc)
            return None, None
        return out, err


def stop_child(proc: subprocess.Popen) -> None:
    """End every process of a point: SIGTERM to the child's process group (mpirun passes it on
    to its ranks), up to TERM_GRACE_S for the session to empty, then SIGKILL to the group and to
    every process left in the child's session: mpirun starts its ranks in process groups of
    their own, which a signal to its group misses, but they stay in its session. The child is
    reaped and its pipes closed."""
    signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    try:
        proc.communicate(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    # mpirun may end before its ranks do: they get the rest of the grace period.
    while time.monotonic() < deadline and session_members(proc.pid):
        time.sleep(0.05)
    signal_group(proc.pid, signal.SIGKILL)
    kill_session(proc.pid)
    try:
        proc.communicate(timeout=DRAIN_S)
    except subprocess.TimeoutExpired:  # a process outside the session holds the pipes
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # nothing left in the group (or only what another user owns)


def session_members(sid: int) -> list[int]:
    """The live processes of session sid (zombies left out: they are already dead), from
    /proc/*/stat; [] where there is no /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # ended meanwhile
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 1:].split()
        try:
            if fields[0] not in (b"Z", b"X") and int(fields[3]) == sid:
                found.append(int(name))
        except (IndexError, ValueError):
            continue
    return found


def kill_session(sid: int) -> None:
    """SIGKILL every process of session sid, looking again until none is left (one may fork
    while the others die) or SESSION_ROUNDS looks have passed (one stuck in the kernel)."""
    for _ in range(SESSION_ROUNDS):
        members = [pid for pid in session_members(sid) if pid != os.getpid()]
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


# The programs ppbench hands runs to, beside it (harness/cli/program_beside.h): CUDA runs, the
# processes of an mpirun, and both.
PROGRAMS_BESIDE = ("ppbench-cuda", "ppbench-mpi", "ppbench-cuda-mpi")


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_of_programs(ppbench: str) -> str:
    """ppbench's own sha256 where it stands alone; else one over it and the programs beside it
    that run points (a rebuilt ppbench-cuda with an unchanged ppbench is another binary)."""
    beside = [os.path.join(os.path.dirname(ppbench), name) for name in PROGRAMS_BESIDE]
    present = [path for path in beside if os.path.isfile(path)]
    if not present:
        return sha256_of(ppbench)
    digest = hashlib.sha256()
    for path in [ppbench, *present]:
        digest.update(f"{os.path.basename(path)} {sha256_of(path)}\n".encode())
    return digest.hexdigest()


def version_lines(program: str) -> list[str]:
    """`program --version`, line by line; [] where it cannot run."""
    try:
        version = run_child([program, "--version"], PROBE_TIMEOUT)
    except OSError:
        return []
    return (version.stdout + version.stderr).splitlines() if version else []


# ppbench-cuda --version's line of the CUDA runtime, driver and cuBLASLt versions.
CUDA_STACK_LINE = "CUDA runtime "


def version_facts(ppbench: str) -> tuple[list[str], bool, str | None]:
    """The GPU models ppbench's CUDA runs see ("GPU k: <model>, ..." lines), whether it runs
    across processes (MPI), and the CUDA stack they run on ("CUDA runtime 13.0, driver 13.0,
    cuBLASLt 13.1.0"; None without a GPU). A ppbench that hands its CUDA runs to ppbench-cuda
    beside it says so in its --version, and then that program lists the GPUs."""
    own = version_lines(ppbench)
    cuda = own
    if any(CUDA_BESIDE in line for line in own):
        cuda = version_lines(os.path.join(os.path.dirname(ppbench), "ppbench-cuda"))
    gpus: list[str] = []
    stack = None
    for line in cuda:
        head, _, rest = line.partition(": ")
        if head.startswith("GPU ") and head[4:].strip().isdigit() and rest:
            gpus.append(rest.split(",")[0].strip())
        elif line.startswith(CUDA_STACK_LINE):
            stack = line.strip()
    return gpus, any(line.startswith(MPI_VERSION_LINE) for line in own), stack


# ppbench --version's MPI line where it was built with MPI but ppbench-mpi, which runs the
# processes of an mpirun, is not beside it (a copy of ppbench alone in another folder).
MPI_MISSING_LINE = "MPI: ppbench-mpi, "
MISSING_BESIDE = "is missing beside this ppbench"


def mpi_missing_beside(ppbench: str) -> bool:
    """Whether ppbench was built with MPI but lacks ppbench-mpi beside it (its --version says
    so): then the fix is a copy of ppbench-mpi, not another build."""
    return any(line.startswith(MPI_MISSING_LINE) and MISSING_BESIDE in line
               for line in version_lines(ppbench))


def probe(ppbench: str) -> dict[str, Any]:
    """Check that ppbench runs (before the first point) and say who records: recorded_by.

    PpbenchError 2: no such file; 3: it exists but cannot run (not executable, not a program,
    ppbench's own exit 3); 1: it runs but fails the probe.
    """
    if not os.path.exists(ppbench):
        raise PpbenchError(f"--ppbench {ppbench}: no such file (build it first: make)", 2)
    if os.path.isdir(ppbench) or not os.access(ppbench, os.X_OK):
        raise PpbenchError(f"--ppbench {ppbench}: exists but is not an executable file", 3)
    text = " ".join(PROBE_ARGV[:7])
    try:
        proc = run_child([ppbench, *PROBE_ARGV], PROBE_TIMEOUT)
    except OSError as e:
        raise PpbenchError(f"--ppbench {ppbench}: cannot run it: {e.strerror or e}", 3) from None
    if proc is None:
        raise PpbenchError(f"--ppbench {ppbench}: '{text}' did not finish in "
                           f"{PROBE_TIMEOUT:g} s", 3)
    if proc.returncode != 0:
        code = EXIT_MACHINE if proc.returncode == EXIT_MACHINE else EXIT_FAILURE
        raise PpbenchError(f"--ppbench {ppbench}: '{text}' exited {proc.returncode}: "
                           f"{first_line(proc.stderr)}", code)
    try:
        prov = loads_finite(proc.stdout)["provenance"]
        if not isinstance(prov, dict):
            raise TypeError("provenance is not an object")
    except (ValueError, KeyError, TypeError) as e:
        raise PpbenchError(f"--ppbench {ppbench}: '{text}' printed no record with provenance: "
                           f"{e}", EXIT_FAILURE) from None
    gpus, mpi, stack = version_facts(ppbench)
    return {"git_commit": prov.get("git_commit"), "host": prov.get("host"),
            "cpu": prov.get("cpu"), "cpu_cores": prov.get("cpu_cores"),
            "gpu": ", ".join(gpus) or None, "gpu_stack": stack if gpus else None, "mpi": mpi,
            "ppbench": ppbench, "ppbench_sha256": sha256_of_programs(ppbench)}


def visible_gpu_count() -> int:
    """The GPUs `nvidia-smi -L` lists (one "GPU k: ..." line each); 0 without nvidia-smi."""
    if shutil.which(NVIDIA_SMI) is None:
        return 0
    try:
        proc = subprocess.run([NVIDIA_SMI, "-L"], capture_output=True, encoding="utf-8",
                              errors="replace", timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if proc.returncode != 0:
        return 0
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))


# --- running points -------------------------------------------------------------------------

def run_point(ppbench: str, point: Point, sweep: str, timeout: float,
              recorded_by: dict | None = None) -> dict:
    """Run one point and turn the outcome into a row (Stopped when a stop signal came)."""
    base: dict[str, Any] = {"sweep": sweep, "point": point.as_dict()}
    if recorded_by is not None:
        base["recorded_by"] = recorded_by
    try:
        proc = run_child(point.command_line(ppbench), timeout, point.environment(os.cpu_count()))
    except OSError as e:
        return failed_row(point, base, "error", f"cannot run {ppbench}: {e}")
    if proc is None:
        return failed_row(point, base, "error", f"timed out after {timeout:g} s")
    stderr = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode in (EXIT_INVALID, EXIT_MACHINE):
        message = stderr[0] if stderr else (
            "invalid parameters" if proc.returncode == EXIT_INVALID else "machine problem")
        return failed_row(point, base, "invalid" if proc.returncode == EXIT_INVALID else "error",
                          message, proc.returncode)
    if proc.returncode != 0:
        message = stderr[-1] if stderr else ""
        return failed_row(point, base, "error", f"exit {proc.returncode}: {message}".strip(),
                          proc.returncode)
    try:
        result = loads_finite(proc.stdout)  # the row is appended with allow_nan=False
        if not isinstance(result, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        return failed_row(point, base, "error", f"unparseable output: {e}")
    row = dict(result)
    row.update(base)
    row["status"] = "ok"
    if point.is_run:
        row["closed_form"] = closed_form(ppbench, point, timeout)
        row["closed_form_cost"] = CLOSED_FORM_COST
    else:
        row.update({"cost": point.cost, "comm": point.comm})
    return row


def closed_form(ppbench: str, point: Point, timeout: float) -> dict | None:
    """The closed form ppbench states for this schedule, D, N, v (None when it cannot say)."""
    try:
        proc = run_child([ppbench, *point.closed_form_argv()], timeout)
        result = loads_finite(proc.stdout) if proc is not None and proc.returncode == 0 \
            else None
    except (OSError, ValueError):
        return None
    value = result.get("closed_form") if isinstance(result, dict) else None
    return value if isinstance(value, dict) else None


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def failed_row(point: Point, base: dict, status: str, error: str,
               exit_code: int | None = None) -> dict:
    """A row of a point that gave no record: the point, the error, and the date (UTC, as
    ppbench's provenance writes it), which a record would have carried in its provenance."""
    row = point.as_dict()
    row.update(base)
    row.update({"status": status, "error": error, "date": utc_now()})
    if exit_code is not None:
        row["exit_code"] = exit_code
    return row
