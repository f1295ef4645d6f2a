"""Tests of scripts/gpu-check.sh's argument handling (before any GPU is needed) and of
scripts/device-deps.sh's unpacking, which gpu-check uses on machines that can install nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import SCRIPTS

GPU_CHECK = SCRIPTS / "gpu-check.sh"
DEVICE_DEPS = SCRIPTS / "device-deps.sh"


def run(args, env=None):
    return subprocess.run(["bash", *map(str, args)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, word", [
    (["--only", "kernel-tests,bogus"], "bogus"),
    (["--bench"], "--bench"),
    (["--frobnicate"], "--frobnicate"),
])
def test_bad_arguments_exit_2_naming_the_value(args, word):
    r = run([GPU_CHECK, *args])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and word in lines[0], r.stderr


def test_help_lists_the_parts():
    r = run([GPU_CHECK, "--help"])
    assert r.returncode == 0
    for part in ("--only", "kernel-tests", "exec-tests", "--bench-filter", ".device-deps"):
        assert part in r.stdout


def test_without_a_gpu_nothing_is_built_or_written(tmp_path):
    # nvidia-smi that lists nothing, first on PATH: the check stops before configuring.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (fake / "nvidia-smi").chmod(0o755)
    build = tmp_path / "build"
    r = run([GPU_CHECK, "--build-dir", build, "--only", "kernel-tests"],
            env={"PATH": f"{fake}:{os.environ['PATH']}"})
    assert r.returncode == 2
    assert "no GPU visible" in r.stderr
    assert not build.exists()


def test_device_deps_usage_and_empty_store(tmp_path):
    assert run([DEVICE_DEPS]).returncode == 2
    assert run([DEVICE_DEPS, "unpack"]).returncode == 2
    r = run([DEVICE_DEPS, "unpack", tmp_path / "root"],
            env={"PPBENCH_DEVICE_DEPS": str(tmp_path / "empty")})
    assert r.returncode == 1
    assert "no packages" in r.stderr


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb not installed")
def test_device_deps_unpacks_into_a_cmake_prefix(tmp_path):
    # A minimal package holding a CMake config file, as the real -dev packages do.
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        "Package: fake-dev\nVersion: 1.0\nArchitecture: all\nMaintainer: ppbench\n"
        "Description: test package\n")
    cfg = pkg / "usr" / "share" / "cmake" / "Fake"
    cfg.mkdir(parents=True)
    (cfg / "FakeConfig.cmake").write_text("set(FAKE_FOUND TRUE)\n")
    store = tmp_path / "store"
    store.mkdir()
    subprocess.run(["dpkg-deb", "--build", str(pkg), str(store / "fake-dev.deb")], check=True,
                   capture_output=True)
    root = tmp_path / "root"
    r = run([DEVICE_DEPS, "unpack", root], env={"PPBENCH_DEVICE_DEPS": str(store)})
    assert r.returncode == 0, r.stderr
    prefix = Path(r.stdout.strip())
    assert prefix == root.resolve() / "usr"
    assert (prefix / "share" / "cmake" / "Fake" / "FakeConfig.cmake").is_file()
