"""Tests of scripts/choose_bench_backend.sh and of `make bench`'s use of it, with a fake
nvidia-smi and a fake `ppbench --version` first on PATH (so they hold on GPU machines too)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import SCRIPTS

ROOT = SCRIPTS.parent
CHOOSER = SCRIPTS / "choose_bench_backend.sh"

H100 = "GPU 0: NVIDIA H100 80GB HBM3, 132 SMs, 79.1 GiB, compute capability 9.0"
VERSION_GPU = f"ppbench 0.1.0 (CUDA support compiled in)\n{H100}\nCUDA runtime 13.0, driver 13.0"
VERSION_NO_DEVICE = ("ppbench 0.1.0 (CUDA support compiled in)\nno GPU visible "
                     "(cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA "
                     "runtime version); CUDA runtime 13.0, driver none, cuBLASLt 13.1.0")
VERSION_NO_CUDA = "ppbench 0.1.0 (built without CUDA)"
# What the build's separate programs say: ppbench hands CUDA runs to ppbench-cuda beside it.
VERSION_SPLIT = ("ppbench 0.1.0 (CUDA runs by ppbench-cuda beside it; `ppbench-cuda --version` "
                 "lists the GPUs)\nMPI: not compiled in (runs stay in one process)")
SMI_ONE = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0000)"


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def machine(tmp_path: Path):
    """make(smi, version) -> (env, ppbench path): smi None means no nvidia-smi on PATH; else the
    text `nvidia-smi -L` prints (exit 6, as the real one, when it lists nothing)."""

    def make(smi: str | None, version: str) -> tuple[dict, str]:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        # Only what the chooser needs, so a real nvidia-smi elsewhere on PATH is never seen.
        for tool in ("bash", "sh", "grep", "sed", "cat", "dirname"):
            found = shutil.which(tool)
            if found and not (bin_dir / tool).exists():
                (bin_dir / tool).symlink_to(found)
        if smi is not None:
            code = 0 if smi else 6
            executable(bin_dir / "nvidia-smi", f"#!/bin/sh\ncat <<'EOF'\n{smi}\nEOF\nexit {code}\n")
        ppbench = executable(tmp_path / "ppbench",
                             f"#!/bin/sh\ncat <<'EOF'\n{version}\nEOF\n")
        env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
        return env, str(ppbench)

    return make


def choose(env: dict, ppbench: str, forced: str | None = None) -> subprocess.CompletedProcess:
    if forced is not None:
        env = {**env, "BENCH_BACKEND": forced}
    return subprocess.run([shutil.which("bash"), str(CHOOSER), ppbench], env=env,
                          capture_output=True, text=True, check=False)


def test_gpu_when_nvidia_smi_lists_a_device_and_ppbench_sees_it(machine):
    env, ppbench = machine(SMI_ONE, VERSION_GPU)
    run = choose(env, ppbench)
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"cuda: nvidia-smi lists 1 GPU and ppbench runs on {H100}\n"


@pytest.mark.parametrize("smi, version, why", [
    (None, VERSION_GPU, "cpu: no GPU (nvidia-smi not found)"),
    ("", VERSION_GPU, "cpu: no GPU (nvidia-smi lists no device)"),
    (SMI_ONE, VERSION_NO_CUDA, "cpu: nvidia-smi lists 1 GPU, but {ppbench} was built without CUDA"),
    (SMI_ONE, VERSION_NO_DEVICE, "cpu: nvidia-smi lists 1 GPU, but {ppbench} sees no GPU "
                                 "(cudaErrorInsufficientDriver: CUDA driver version is "
                                 "insufficient for CUDA runtime version)"),
])
def test_cpu_without_a_usable_gpu(machine, smi, version, why):
    env, ppbench = machine(smi, version)
    run = choose(env, ppbench)
    assert run.returncode == 0, run.stderr
    assert run.stdout == why.format(ppbench=ppbench) + "\n"


def test_bench_backend_forces_cpu_on_a_gpu_machine(machine):
    env, ppbench = machine(SMI_ONE, VERSION_GPU)
    assert choose(env, ppbench, "cpu").stdout == "cpu: forced by BENCH_BACKEND=cpu\n"


def test_bench_backend_forces_gpu_without_nvidia_smi_where_ppbench_sees_one(machine):
    env, ppbench = machine(None, VERSION_GPU)
    run = choose(env, ppbench, "cuda")
    assert run.returncode == 0
    assert run.stdout == f"cuda: forced by BENCH_BACKEND=cuda; ppbench runs on {H100}\n"


@pytest.mark.parametrize("version, why", [
    (VERSION_NO_CUDA, "was built without CUDA"),
    (VERSION_NO_DEVICE, "sees no GPU (cudaErrorInsufficientDriver"),
])
def test_forced_gpu_without_a_usable_gpu_exits_3(machine, version, why):
    env, ppbench = machine(SMI_ONE, version)
    run = choose(env, ppbench, "cuda")
    assert run.returncode == 3 and run.stdout == ""
    assert run.stderr.startswith("choose_bench_backend: BENCH_BACKEND=cuda, but ")
    assert why in run.stderr and len(run.stderr.splitlines()) == 1


def test_bad_bench_backend_and_missing_ppbench_exit_2(machine, tmp_path):
    env, ppbench = machine(SMI_ONE, VERSION_GPU)
    run = choose(env, ppbench, "tpu")
    assert run.returncode == 2 and "BENCH_BACKEND=tpu is not a measured sweep" in run.stderr
    run = choose(env, str(tmp_path / "absent"))
    assert run.returncode == 2 and "no ppbench at" in run.stderr


def test_separate_programs_ask_ppbench_cuda_beside_ppbench(machine, tmp_path):
    env, ppbench = machine(SMI_ONE, VERSION_SPLIT)
    run = choose(env, ppbench)
    assert run.returncode == 0, run.stderr
    cuda = tmp_path / "ppbench-cuda"
    assert run.stdout == (f"cpu: nvidia-smi lists 1 GPU, but {cuda}, which makes its CUDA runs, "
                          "is missing\n")
    executable(cuda, f"#!/bin/sh\ncat <<'EOF'\n{VERSION_NO_DEVICE}\nEOF\n")
    assert choose(env, ppbench).stdout.startswith(
        f"cpu: nvidia-smi lists 1 GPU, but {cuda} sees no GPU (cudaErrorInsufficientDriver")
    executable(cuda, f"#!/bin/sh\ncat <<'EOF'\n{VERSION_GPU}\nEOF\n")
    run = choose(env, ppbench)
    assert run.stdout == f"cuda: nvidia-smi lists 1 GPU and ppbench runs on {H100}\n"
    run = choose(env, ppbench, "cuda")
    assert run.stdout == f"cuda: forced by BENCH_BACKEND=cuda; ppbench runs on {H100}\n"


# --- make bench ----------------------------------------------------------------------------

def make_dry_run(env: dict, ppbench: str, *args: str) -> subprocess.CompletedProcess:
    """`make -n bench`: make runs only the recipe lines that call $(MAKE), which is where the
    choice is made; every other command (builds, sweeps) is printed, not run."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    path = env["PATH"] + os.pathsep + os.path.dirname(make)
    clean = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    clean.update(env, PATH=path)
    return subprocess.run([make, "-n", "-C", str(ROOT), "bench", f"PPBENCH={ppbench}", *args],
                          env=clean, capture_output=True, text=True, check=False)


def test_make_bench_picks_the_cpu_sweep_without_a_gpu(machine):
    # make needs the system's PATH, which may hold a real nvidia-smi: the fake one lists nothing.
    env, ppbench = machine("", VERSION_GPU)
    run = make_dry_run(env, ppbench)
    assert run.returncode == 0, run.stderr
    assert ("make bench: theory sweep, then the cpu sweep: no GPU (nvidia-smi lists no device)"
            in run.stdout)
    assert "benchmarks/sweeps/cpu.json" in run.stdout
    assert "benchmarks/sweeps/cuda.json" not in run.stdout


def test_make_bench_picks_the_gpu_sweep_on_a_gpu_machine(machine):
    env, ppbench = machine(SMI_ONE, VERSION_GPU)
    run = make_dry_run(env, ppbench)
    assert run.returncode == 0, run.stderr
    assert "make bench: theory sweep, then the cuda sweep: nvidia-smi lists 1 GPU" in run.stdout
    assert "benchmarks/sweeps/cuda.json" in run.stdout and "--out results/latest/cuda" in run.stdout
    assert "benchmarks/sweeps/cpu.json" not in run.stdout
    # and BENCH_BACKEND still forces the CPU sweep there
    run = make_dry_run(env, ppbench, "BENCH_BACKEND=cpu")
    assert "then the cpu sweep: forced by BENCH_BACKEND=cpu" in run.stdout
    assert "benchmarks/sweeps/cpu.json" in run.stdout


def test_make_bench_stops_on_a_bad_bench_backend(machine):
    env, ppbench = machine("", VERSION_GPU)
    run = make_dry_run(env, ppbench, "BENCH_BACKEND=tpu")
    assert run.returncode != 0
    assert "BENCH_BACKEND=tpu is not a measured sweep" in run.stderr
    assert "sweeps/" not in run.stdout
