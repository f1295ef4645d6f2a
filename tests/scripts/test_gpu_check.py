"""Tests of scripts/gpu-check.sh's argument handling (before any GPU is needed) and of
scripts/device-deps.sh's unpacking, which gpu-check uses on machines that can install nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from conftest import SCRIPTS

GPU_CHECK = SCRIPTS / "gpu-check.sh"
DEVICE_DEPS = SCRIPTS / "device-deps.sh"


def run(args, env=None):
    return subprocess.run(["bash", *map(str, args)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_gtest_filter_reaches_the_programs_and_the_summary(gpu_world):
    w = gpu_world
    r = check(w, "--only", "sanitizer-memcheck,kernel-tests",
              "--gtest-filter", "Dtypes/Amoeba*:-*D8*")
    assert r.returncode == 0, r.stdout + r.stderr
    tb = tarballs(w)
    for piece in ("sanitizer-memcheck", "kernel-tests"):
        s, files = piece_summary(tb[piece])
        assert s["gtest_filter"] == "Dtypes/Amoeba*:-*D8*"
        logs = [v for k, v in files.items() if k.endswith("_tests.log")]
        assert logs and all("filter Dtypes/Amoeba*:-*D8*" in v for v in logs)
    # without the flag the programs see no filter and the summary says so
    for t in w["out"].iterdir():
        t.unlink()
    r = check(w, "--only", "kernel-tests")
    s, files = piece_summary(tarballs(w)["kernel-tests"])
    assert s["gtest_filter"] is None
    assert any("filter none" in v for k, v in files.items() if k.endswith("_tests.log"))


def test_sanitize_programs_picks_the_programs_and_a_benchmark_records_no_filter(gpu_world):
    w = gpu_world
    write_exe(w["bundle"] / "bin" / "cuda_gemm_bench",
              FAKE_BENCH.replace("/usr/bin/env python3", sys.executable))
    r = check(w, "--only", "sanitizer-racecheck,benchmarks", "--sanitize-programs",
              "cuda_kernel_tests", "--gtest-filter", "-*Amoeba*")
    assert r.returncode == 0, r.stdout + r.stderr
    tb = tarballs(w)
    s, _ = piece_summary(tb["sanitizer-racecheck"])
    assert [step["name"] for step in s["steps"]] == ["racecheck-cuda_kernel_tests"]
    assert s["gtest_filter"] == "-*Amoeba*"
    s, _ = piece_summary(tb["benchmarks"])  # it runs no GoogleTest: no filter to record
    assert s["gtest_filter"] is None and s["shard"] is None


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
    assert r.returncode == 3  # the machine's, as for ppbench itself
    assert "no GPU visible" in r.stderr
    assert not build.exists()


def test_device_deps_usage_and_empty_store(tmp_path):
    for args, word in [([], "no action"), (["unpack"], "one folder"), (["bogus"], "'bogus'")]:
        r = run([DEVICE_DEPS, *args])
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and word in r.stderr, r.stderr
    r = run([DEVICE_DEPS, "unpack", tmp_path / "root"],
            env={"PPBENCH_DEVICE_DEPS": str(tmp_path / "empty")})
    assert r.returncode == 3  # the machine has nothing to unpack
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


# ------------------------------------------------------------------------------------------------
# gpu-check with a GPU (a fake nvidia-smi) and a fake bundle: fake programs that print GoogleTest
# output and write its JSON, a fake ppbench, ncu and compute-sanitizer. Nothing is built.

LAUNCHER = SCRIPTS / "gpu-bundle-run.sh"
GPU = "NVIDIA H100 80GB HBM3"
SLUG = "NVIDIA-H100-80GB-HBM3"
NO_DEVICE = "no CUDA device visible: cudaErrorNoDevice: no CUDA-capable device is detected"
TWO_GPUS = "NCCL point-to-point needs two GPUs; this node shows 1"


def write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_gtest(tests, sleep: int = 0, rc: int | None = None) -> str:
    """A shell program printing GoogleTest's console output for tests [(suite.name, result,
    skip message)] and writing its --gtest_output JSON (GoogleTest 1.12: no skip messages)."""
    log = []
    suites: dict[str, list] = {}
    for name, result, msg in tests:
        log.append(f"[ RUN      ] {name}")
        if result == "SKIPPED":
            log += ["/src/tests/cuda/gpu_test_util.h:26: Skipped", msg, "",
                    f"[  SKIPPED ] {name} (0 ms)"]
        elif result == "FAILED":
            log += ["/src/x.cpp:1: Failure", msg, f"[  FAILED  ] {name} (1 ms)"]
        else:
            log.append(f"[       OK ] {name} (1 ms)")
        suite, test = name.split(".", 1)
        entry = {"name": test, "status": "RUN",
                 "result": "SKIPPED" if result == "SKIPPED" else "COMPLETED"}
        if result == "FAILED":
            entry["failures"] = [{"failure": msg, "type": ""}]
        suites.setdefault(suite, []).append(entry)
    data = {"tests": len(tests),
            "testsuites": [{"name": s, "testsuite": t} for s, t in suites.items()]}
    failed = any(r == "FAILED" for _, r, _ in tests)
    code = rc if rc is not None else (1 if failed else 0)
    return ("#!/bin/sh\nout=''\nfor a in \"$@\"; do case \"$a\" in --gtest_output=json:*) "
            "out=\"${a#--gtest_output=json:}\";; esac; done\n"
            "echo \"shard ${GTEST_SHARD_INDEX:-none}/${GTEST_TOTAL_SHARDS:-none}\"\n"
            "echo \"filter ${GTEST_FILTER:-none}\"\n"
            "echo 'partial output'\n"
            + (f"sleep {sleep}\n" if sleep else "")
            + "cat <<'LOGEOF'\n" + "\n".join(log) + "\nLOGEOF\n"
            + "[ -n \"$out\" ] && cat >\"$out\" <<'JSONEOF'\n" + json.dumps(data) + "\nJSONEOF\n"
            + f"exit {code}\n")


FAKE_PPBENCH = r'''#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
if a[:1] == ["--version"]:
    print("ppbench 0.1.0 (CUDA support compiled in)")
    print("GPU 0: NVIDIA H100 80GB HBM3; CUDA runtime 13.0, driver 13.0, cuBLASLt 13.1.0")
    sys.exit(0)
if a[:1] == ["list"]:
    if "--format" in a:
        print("ppbench: error: The following arguments were not expected: json --format",
              file=sys.stderr)
        sys.exit(2)
    print("schedule          constraints                              description")
    print("gpipe             D >= 1, N >= 1                           GPipe")
    print("1f1b              N >= D                                   1F1B")
    print("dualpipe          D even, N even, N >= 2D                  DualPipe")
    print("")
    print("D = --devices, N = --microbatches.")
    sys.exit(0)
if a[:1] == ["memory"]:  # the model without a GPU: refuses what the schedule refuses
    opt = {a[i]: a[i + 1] for i in range(len(a) - 1) if a[i].startswith("--")}
    s, d, n = opt["--schedule"], int(opt["--devices"]), int(opt["--microbatches"])
    if s == "dualpipe" or (s == "1f1b" and n < d):
        print(f"ppbench: error: {s} does not allow D={d}, N={n}", file=sys.stderr)
        sys.exit(2)
    print("{}")
    sys.exit(0)
if a[:1] == ["run"]:
    if "--help" in a:
        has_check = os.environ.get("FAKE_NO_CHECK") != "1"
        print("  --format TEXT\n"
              + ("  --check  compare with the unpipelined step\n" if has_check else ""))
        sys.exit(0)
    opt = {a[i]: a[i + 1] for i in range(len(a) - 1) if a[i].startswith("--")}
    s, d, n = opt["--schedule"], int(opt["--devices"]), int(opt["--microbatches"])
    if s == "dualpipe" or (s == "1f1b" and n < d):
        print(f"ppbench: error: {s} does not allow D={d}, N={n}", file=sys.stderr)
        sys.exit(2)
    bad = os.environ.get("FAKE_BAD", "")
    if os.environ.get("FAKE_RUN_SECONDS"):
        import time
        time.sleep(float(os.environ["FAKE_RUN_SECONDS"]))
    if os.environ.get("FAKE_GPU_REFUSES") == f"D{d}":
        print(f"ppbench: error: --virtual-devices {d}: this GPU has too few SMs", file=sys.stderr)
        sys.exit(2)
    if os.environ.get("FAKE_NO_DEVICE") == f"D{d}":
        print("ppbench: error: --backend cuda: no CUDA device visible", file=sys.stderr)
        sys.exit(3)
    passed = f"{s}/D{d}" != bad
    print(json.dumps({"command": "run", "schedule": s, "devices": d, "microbatches": n,
                      "throughput": {"samples_per_s": 100.0 * n / (n + d - 1)},
                      "check": {"max_rel_error": 1e-6 if passed else 0.5, "worst_tensor": "W0",
                                "tolerance": 1e-3, "passed": passed}}))
    sys.exit(0)
sys.exit(0)
'''

FAKE_NCU = r'''#!/bin/bash
# Profiles one kernel when the NVTX filter names the ppbench domain, none otherwise.
filter=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nvtx-include) filter="$2"; shift 2 ;;
    --version) echo "NVIDIA Nsight Compute fake"; exit 0 ;;
    *) shift ;;
  esac
done
echo "==PROF== Connected to process 1 (/x/ppbench)"
case "$filter" in
  regex:ppbench@*) echo '==PROF== Profiling "gemm_kernel" - 0: 0%....50%....100% - 1 pass' ;;
  *) echo "==WARNING== No kernels were profiled." ;;
esac
echo "==PROF== Disconnected from process 1"
'''

FAKE_SANITIZER = r'''#!/bin/bash
# Runs the program after the options (the bundle's launcher), like compute-sanitizer.
while [ $# -gt 0 ]; do case "$1" in */run) break ;; *) shift ;; esac; done
echo "========= COMPUTE-SANITIZER"
"$@"; rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
'''


@pytest.fixture
def gpu_world(tmp_path: Path) -> dict:
    fakebin = tmp_path / "fakebin"
    write_exe(fakebin / "nvidia-smi", f"""#!/bin/sh
case "$*" in
  -L) echo "GPU 0: {GPU} (UUID: GPU-fake)" ;;
  *query-gpu=name*) echo "{GPU}" ;;
  *query-gpu=driver_version*) echo "580.95.05" ;;
  *) echo "fake nvidia-smi $*" ;;
esac
""")
    write_exe(fakebin / "ncu", FAKE_NCU)
    write_exe(fakebin / "compute-sanitizer", FAKE_SANITIZER)
    libs = tmp_path / "cuda-libs"
    libs.mkdir()
    (libs / "libcublasLt.so.13").write_text("fake\n")
    bundle = tmp_path / "gpu-bundle"
    (bundle / "lib").mkdir(parents=True)
    shutil.copy(LAUNCHER, bundle / "run")
    (bundle / "run").chmod(0o755)
    (bundle / "bundle.env").write_text(
        "BUNDLE_COMMIT=0123abc\nBUNDLE_DIRTY=false\nBUNDLE_CUBLAS_SONAMES=libcublasLt.so.13\n"
        "BUNDLE_NCCL_SONAME=libnccl.so.2\nBUNDLE_NCCL_REQUIRED=0\n")
    (bundle / "bundle.json").write_text('{"commit": "0123abc"}\n')
    # ppbench hands CUDA runs (and the GPU part of --version) to ppbench-cuda beside it.
    for program in ("ppbench", "ppbench-cuda"):
        write_exe(bundle / "bin" / program,
                  FAKE_PPBENCH.replace("/usr/bin/env python3", sys.executable))
    passing = [("Layers.Gemm/f32", "OK", ""), ("Layers.Gemm/bf16", "OK", "")]
    write_exe(bundle / "bin" / "cuda_kernel_tests", fake_gtest(passing))
    write_exe(bundle / "bin" / "cuda_exec_tests", fake_gtest(passing))
    env = {**os.environ, "PATH": f"{fakebin}:{os.environ['PATH']}",
           "PPBENCH_CUDA_LIB_DIRS": str(libs), "PPBENCH_BUNDLE_SYSTEM_DIRS": "",
           "PPBENCH_BUNDLE_PYTHON": "false"}
    env.pop("PPBENCH_GIT_COMMIT", None)
    return {"tmp": tmp_path, "bundle": bundle, "env": env, "results": tmp_path / "results",
            "out": tmp_path / "out", "fakebin": fakebin}


def make_kernel_tests_hang(w: dict) -> None:
    """The bundle's cuda_kernel_tests then passes its one test only after 60 s: a step that a
    time limit (the piece's, the call's deadline, a signal) has to stop."""
    write_exe(w["bundle"] / "bin" / "cuda_kernel_tests",
              fake_gtest([("Layers.Gemm/f32", "OK", "")], sleep=60))


def check(w, *args, timeout=60):
    return subprocess.run(["bash", str(GPU_CHECK), "--bundle", str(w["bundle"]), "--results",
                           str(w["results"]), "--out", str(w["out"]), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=w["env"])


@pytest.mark.parametrize("option", ["--out", "--results"])
def test_a_folder_that_cannot_be_made_is_exit_2_before_any_piece(gpu_world, option):
    w = gpu_world
    blocker = w["out"].parent / "a-file"
    blocker.write_text("not a folder\n")
    r = check(w, "--only", "kernel-tests", option, blocker / "inside")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [
        f"gpu-check: cannot create the {option + ' ' if option == '--out' else 'results '}"
        f"folder '{blocker / 'inside'}' (Not a directory)"]
    assert "kernel-tests" not in r.stdout


def tarballs(w) -> dict[str, Path]:
    """piece name -> tarball, checking the <piece>-<gpu>-<date>.tar.gz form."""
    out = {}
    for t in sorted(w["out"].iterdir()):
        m = re.fullmatch(rf"(.+)-{SLUG}-(\d{{4}}-\d\d-\d\dT\d{{6}}Z)\.tar\.gz", t.name)
        assert m, t.name
        out[m.group(1)] = t
    return out


def piece_summary(tarball: Path) -> tuple[dict, dict[str, str]]:
    with tarfile.open(tarball) as tf:
        files = {m.name: tf.extractfile(m).read().decode() for m in tf.getmembers() if m.isfile()}
    summary = next(json.loads(v) for k, v in files.items() if k.endswith("/summary.json"))
    return summary, files


def test_all_tests_skipped_without_a_device_is_a_failure_where_a_gpu_is_visible(gpu_world):
    w = gpu_world
    write_exe(w["bundle"] / "bin" / "cuda_kernel_tests", fake_gtest(
        [("Layers.Gemm/f32", "SKIPPED", NO_DEVICE), ("Layers.Gemm/bf16", "SKIPPED", NO_DEVICE)]))
    r = check(w, "--only", "kernel-tests")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED pieces: kernel-tests" in r.stderr
    s, _ = piece_summary(tarballs(w)["kernel-tests"])
    assert s["status"] == "failed"
    assert s["tests"]["passed"] == 0 and s["tests"]["skipped"] == 2
    assert [t["name"] for t in s["tests"]["skipped_disallowed"]] == ["Layers.Gemm/f32",
                                                                     "Layers.Gemm/bf16"]
    assert s["tests"]["skipped_disallowed"][0]["reason"] == NO_DEVICE
    assert s["gpu"] == GPU and s["commit"] == "0123abc" and s["part"] == "kernel-tests"
    assert s["driver"] == "580.95.05" and s["cublas"] == "13.1.0" and s["mode"] == "bundle"


def test_a_two_gpu_skip_is_allowed(gpu_world):
    w = gpu_world
    write_exe(w["bundle"] / "bin" / "cuda_exec_tests", fake_gtest(
        [("Transport.Nccl", "SKIPPED", TWO_GPUS), ("Equivalence.OneF1B", "OK", "")]))
    r = check(w, "--only", "exec-tests")
    assert r.returncode == 0, r.stdout + r.stderr
    s, _ = piece_summary(tarballs(w)["exec-tests"])
    assert s["status"] == "passed"
    assert s["tests"]["skipped_allowed"] == [
        {"name": "Transport.Nccl", "reason": TWO_GPUS, "program": "cuda_exec_tests"}]
    assert s["tests"]["skipped_disallowed"] == []
    # the unpacked record too, and the run's summary
    run = next(w["results"].iterdir())
    assert json.loads((run / "exec-tests" / "summary.json").read_text())["status"] == "passed"
    assert json.loads((run / "summary.json").read_text())["pieces"] == {"exec-tests": "passed"}


def test_a_failed_test_fails_the_piece(gpu_world):
    w = gpu_world
    write_exe(w["bundle"] / "bin" / "cuda_kernel_tests", fake_gtest(
        [("Layers.Gemm/f32", "FAILED", "max error 0.5 > 1e-3"), ("Layers.Gemm/bf16", "OK", "")]))
    r = check(w, "--only", "kernel-tests")
    assert r.returncode == 1
    s, _ = piece_summary(tarballs(w)["kernel-tests"])
    assert [t["name"] for t in s["tests"]["failed_tests"]] == ["Layers.Gemm/f32"]


def test_a_piece_killed_at_its_limit_is_timed_out_packed_and_the_next_piece_runs(gpu_world):
    w = gpu_world
    make_kernel_tests_hang(w)
    r = check(w, "--only", "kernel-tests,exec-tests", "--piece-timeout", "2", timeout=40)
    assert r.returncode == 1, r.stdout + r.stderr
    tb = tarballs(w)
    assert set(tb) == {"kernel-tests", "exec-tests"}
    s, files = piece_summary(tb["kernel-tests"])
    assert s["status"] == "timed_out" and s["timed_out"] == ["cuda_kernel_tests"]
    log = next(v for k, v in files.items() if k.endswith("/cuda_kernel_tests.log"))
    assert "partial output" in log
    assert piece_summary(tb["exec-tests"])[0]["status"] == "passed"
    assert tb["kernel-tests"].stat().st_mtime <= tb["exec-tests"].stat().st_mtime


def test_one_tarball_per_piece_and_gtest_shards(gpu_world):
    w = gpu_world
    r = check(w, "--only", "sanitizer,kernel-tests", "--gtest-shard", "1/3")
    assert r.returncode == 0, r.stdout + r.stderr
    tb = tarballs(w)
    assert set(tb) == {"sanitizer-memcheck-shard1of3", "sanitizer-racecheck-shard1of3",
                       "sanitizer-synccheck-shard1of3", "kernel-tests-shard1of3"}
    s, files = piece_summary(tb["sanitizer-racecheck-shard1of3"])
    assert s["shard"] == "1/3" and s["status"] == "passed"
    assert {st["name"] for st in s["steps"]} == {"racecheck-cuda_kernel_tests",
                                                 "racecheck-cuda_exec_tests"}
    log = next(v for k, v in files.items() if k.endswith("/racecheck-cuda_exec_tests.log"))
    assert "shard 1/3" in log and "COMPUTE-SANITIZER" in log
    # unpacked records beside the tarballs, no temporary folders left
    run = next(p for p in w["results"].iterdir() if not p.name.startswith("."))
    assert {p.name for p in run.iterdir()} == set(tb) | {"summary.json"}
    assert [p.name for p in w["results"].iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("args, word", [
    (["--gtest-shard", "3/3"], "3/3"),
    (["--gtest-shard", "x"], "'x'"),
    (["--piece-timeout", "0"], "'0'"),
    (["--piece-timeout", "soon"], "soon"),
    (["--only", "sanitizer-foo"], "sanitizer-foo"),
    (["--bundle", "/nonexistent/bundle"], "/nonexistent/bundle"),
    (["--bundle", "/tmp", "--build-dir", "b"], "--build-dir"),
    (["--equiv-filter", "("], "'('"),
    (["--deadline", "20"], "'20'"),
    (["--deadline", "soon"], "soon"),
    (["--sweep-only", "microbatches"], "microbatches"),
    (["--sweep-only", "stage=1"], "'stage'"),
    (["--sweep-spec", "/no/such/spec.json"], "/no/such/spec.json"),
    (["--sanitize-programs", "cuda_exec_tests,foo"], "'foo'"),
])
def test_more_bad_arguments_exit_2_naming_the_value(args, word):
    r = run([GPU_CHECK, *args])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and word in lines[0], r.stderr


def test_help_documents_every_flag():
    text = GPU_CHECK.read_text()
    flags = set(re.findall(r"^\s+(--[a-z-]+(?:\|--[a-z-]+)*)\)", text, re.M))
    flags = {f for group in flags for f in group.split("|")}
    flags |= set(re.findall(r"^\s+(--[a-z][a-z-]+)\|", text, re.M))
    assert {"--bundle", "--out", "--piece-timeout", "--gtest-shard", "--gtest-filter",
            "--results"} <= flags
    r = run([GPU_CHECK, "--help"])
    for f in flags:
        assert f in r.stdout, f
    for part in ("sanitizer-memcheck", "sanitizer-racecheck", "sanitizer-synccheck", "nvtx",
                 "equivalence", "needs two GPUs", "timed_out"):
        assert part in r.stdout, part


def test_a_bundle_without_cublas_exits_3_and_writes_nothing(gpu_world):
    w = gpu_world
    w["env"]["PPBENCH_CUDA_LIB_DIRS"] = str(w["tmp"] / "nothing")
    write_exe(w["fakebin"] / "ldconfig", "#!/bin/sh\nexit 0\n")
    r = check(w, "--only", "kernel-tests")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "libcublasLt.so.13 not found" in r.stderr
    assert not w["results"].exists() and not w["out"].exists()


def test_equivalence_runs_every_schedule_and_d_and_records_them(gpu_world):
    w = gpu_world
    r = check(w, "--only", "equivalence", "--equiv-filter", "^mlp-f32/")
    assert r.returncode == 0, r.stdout + r.stderr
    s, files = piece_summary(tarballs(w)["equivalence"])
    assert s["status"] == "passed"
    assert s["equivalence"]["counts"] == {"passed": 6, "not_applicable": 3}
    rows = [json.loads(line) for line in
            next(v for k, v in files.items() if k.endswith("/equivalence.jsonl")).splitlines()]
    eq = {r["equivalence"]["label"]: r["equivalence"] for r in rows}
    assert eq["mlp-f32/1f1b/D4"]["microbatches"] == 4
    assert eq["mlp-f32/1f1b/D4"]["status"] == "passed"
    assert eq["mlp-f32/dualpipe/D2"]["status"] == "not_applicable"
    assert "--virtual-devices 4" in eq["mlp-f32/1f1b/D4"]["command"]
    assert "--check" in eq["mlp-f32/1f1b/D4"]["command"]
    table = next(v for k, v in files.items() if k.endswith("/equivalence.txt"))
    assert "n/a" in table and "ok N=2" in table


def test_equivalence_fails_on_passed_false_and_without_the_check_flag(gpu_world):
    w = gpu_world
    w["env"]["FAKE_BAD"] = "1f1b/D4"
    r = check(w, "--only", "equivalence", "--equiv-filter", "^mlp-f32/1f1b")
    assert r.returncode == 1
    s, _ = piece_summary(tarballs(w)["equivalence"])
    assert s["equivalence"]["failed"] == ["mlp-f32/1f1b/D4"]
    shutil.rmtree(w["out"])
    w["env"]["FAKE_NO_CHECK"] = "1"
    r = check(w, "--only", "equivalence")
    assert r.returncode == 1
    assert "no --check flag" in r.stdout + r.stderr


def test_equivalence_a_filter_that_matches_no_case_says_so(gpu_world):
    # The labels are VARIANT/SCHEDULE/D<d> with variants such as mlp-f32-sgd: a filter naming a
    # variant that does not exist fails the piece at once, naming the labels it can match.
    w = gpu_world
    r = check(w, "--only", "equivalence", "--equiv-filter", "^(mlp-sgd|mlp-adamw)/")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "matches none of the" in out and "e.g. mlp-f32/" in out and "mlp-f32-sgd" in out
    s, _ = piece_summary(tarballs(w)["equivalence"])
    assert s["status"] == "failed"


def test_equivalence_is_bounded_per_run_not_as_a_whole(gpu_world):
    # Six runs of 0.6 s under a 2 s piece limit: each run is within it, the whole part is not,
    # and only --deadline bounds the part.
    w = gpu_world
    w["env"]["FAKE_RUN_SECONDS"] = "0.6"
    r = check(w, "--only", "equivalence", "--equiv-filter", "^mlp-f32/", "--piece-timeout", "2",
              "--deadline", "120")
    assert r.returncode == 0, r.stdout + r.stderr
    s, _ = piece_summary(tarballs(w)["equivalence"])
    assert s["status"] == "passed"
    assert s["equivalence"]["counts"] == {"passed": 6, "not_applicable": 3}


def test_equivalence_a_refusal_only_the_gpu_run_makes_is_an_error(gpu_world):
    w = gpu_world
    w["env"]["FAKE_GPU_REFUSES"] = "D8"
    r = check(w, "--only", "equivalence", "--equiv-filter", "^mlp-f32/")
    assert r.returncode == 1, r.stdout + r.stderr
    s, _ = piece_summary(tarballs(w)["equivalence"])
    # gpipe and 1f1b at D8 are errors (memory takes them); dualpipe stays not applicable
    assert s["equivalence"]["counts"] == {"passed": 4, "error": 2, "not_applicable": 3}


def test_tables_runs_gpipes_grid_and_the_scaling_on_fixed_size_virtual_devices(gpu_world):
    w = gpu_world
    r = check(w, "--only", "tables")
    assert r.returncode == 0, r.stdout + r.stderr
    s, files = piece_summary(tarballs(w)["tables"])
    assert s["status"] == "passed"
    rows = [json.loads(line) for line in
            next(v for k, v in files.items() if k.endswith("/gpu_tables.jsonl")).splitlines()]
    got = {(g["schedule"], g["model"], g["devices"], g["microbatches"])
           for g in (r["gpu_table"] for r in rows)}
    models = {g["model"] for g in (r["gpu_table"] for r in rows) if g["schedule"] == "gpipe"}
    assert len(models) == 2
    assert got >= {("gpipe", m, k, n) for m in models for k in (2, 4, 8) for n in (1, 4, 32)}
    assert {(d, n) for sch, _, d, n in got if sch == "1f1b"} == {(1, 8), (2, 8), (4, 8), (8, 8)}
    assert len(rows) == 22
    for r in rows:
        g = r["gpu_table"]
        assert g["status"] == "ok", g
        assert f"--virtual-devices {g['devices']} " in g["command"]
        assert "--sms-per-device 16 " in g["command"] and "--backend cuda" in g["command"]
        assert r["throughput"]["samples_per_s"] > 0
    table = next(v for k, v in files.items() if k.endswith("/gpu_tables.txt"))
    assert "ok: 22" in table


def test_tables_fails_when_a_point_does_not_run(gpu_world):
    w = gpu_world
    w["env"]["FAKE_NO_DEVICE"] = "D8"
    r = check(w, "--only", "tables")
    assert r.returncode == 1
    s, files = piece_summary(tarballs(w)["tables"])
    assert s["status"] == "failed"
    rows = [json.loads(line)["gpu_table"] for line in
            next(v for k, v in files.items() if k.endswith("/gpu_tables.jsonl")).splitlines()]
    assert {r["status"] for r in rows if r["devices"] == 8} == {"error"}
    assert {r["status"] for r in rows if r["devices"] != 8} == {"ok"}
    assert "no CUDA device visible" in next(r for r in rows if r["devices"] == 8)["error"]


def test_nvtx_passes_when_ncu_profiles_a_kernel_in_a_ppbench_range(gpu_world):
    w = gpu_world
    r = check(w, "--only", "nvtx")
    assert r.returncode == 0, r.stdout + r.stderr
    s, files = piece_summary(tarballs(w)["nvtx"])
    assert s["nvtx"] == {"domain": "ppbench", "filter": "regex:ppbench@.*/", "kernels_profiled": 1,
                         "control_kernels_profiled": 0}
    # an ncu whose filter never matches: a failure, every attempt recorded
    write_exe(w["fakebin"] / "ncu", FAKE_NCU.replace("regex:ppbench@*)", "never)"))
    shutil.rmtree(w["out"])
    r = check(w, "--only", "nvtx")
    assert r.returncode == 1
    s, _ = piece_summary(tarballs(w)["nvtx"])
    assert [st["name"] for st in s["steps"]][:3] == ["ncu-1", "ncu-2", "ncu-3"]


def test_the_copy_inside_a_bundle_uses_its_bundle(gpu_world):
    w = gpu_world
    b = w["bundle"]
    shutil.copy(GPU_CHECK, b / "gpu-check.sh")
    (b / "scripts").mkdir()
    # gtest_summary.py reads and writes through the shared results_io.py and script_cli.py, which
    # scripts/gpu-bundle.sh's HELPERS carry beside it.
    for h in ("gtest_summary.py", "gpu_equivalence.py", "results_io.py", "script_cli.py"):
        shutil.copy(SCRIPTS / h, b / "scripts" / h)
    r = subprocess.run(["bash", str(b / "gpu-check.sh"), "--only", "kernel-tests", "--out",
                        str(w["out"])], capture_output=True, text=True, timeout=60, env=w["env"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(tarballs(w)) == {"kernel-tests"}
    # records beside the bundle (its parent folder's results/gpu)
    assert any((w["tmp"] / "results" / "gpu").iterdir())


def test_without_a_bundle_it_configures_builds_then_runs(gpu_world, tmp_path):
    # A fake cmake that "builds" by copying the fake programs where CMake would put them.
    w = gpu_world
    progs = w["bundle"] / "bin"
    write_exe(progs / "cuda_gemm_bench",
              "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --benchmark_out=*) "
              "echo '{\"benchmarks\": []}' >\"${a#--benchmark_out=}\";; esac; done\necho ran\n")
    calls = tmp_path / "cmake-calls.txt"
    write_exe(w["fakebin"] / "nvcc",
              "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    write_exe(w["fakebin"] / "cmake", f"""#!/bin/bash
echo "$*" >>'{calls}'
[ "$1" = -S ] && exit 0
dir="$2"; shift 2; on=0
for a in "$@"; do
  [ "$a" = --target ] && {{ on=1; continue; }}
  [ $on = 1 ] || continue
  case "$a" in
    help) echo "... cuda_gemm_bench"; echo "... ppbench" ;;
    ppbench) cp '{progs}/ppbench' "$dir/ppbench" ;;
    cuda_kernel_tests)
      mkdir -p "$dir/tests/cuda"; cp '{progs}/cuda_kernel_tests' "$dir/tests/cuda/" ;;
    cuda_exec_tests)
      mkdir -p "$dir/tests/cuda_exec"; cp '{progs}/cuda_exec_tests' "$dir/tests/cuda_exec/" ;;
    *) mkdir -p "$dir/benchmarks"; cp "{progs}/$a" "$dir/benchmarks/" ;;
  esac
done
""")
    build = tmp_path / "build"
    build.mkdir()
    r = subprocess.run(["bash", str(GPU_CHECK), "--build-dir", str(build), "--results",
                        str(w["results"]), "--out", str(w["out"]),
                        "--only", "kernel-tests,benchmarks"],
                       capture_output=True, text=True, timeout=60, env=w["env"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(tarballs(w)) == {"build", "kernel-tests", "benchmarks"}
    log = calls.read_text()
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in log
    assert re.search(r"--target ppbench cuda_kernel_tests cuda_gemm_bench", log)
    s, files = piece_summary(tarballs(w)["benchmarks"])
    assert s["mode"] == "build" and s["steps"][0]["name"] == "bench-cuda_gemm_bench"
    assert any(k.endswith("/cuda_gemm_bench.json") for k in files)
    # nvcc missing: exit 3, nothing written
    (w["fakebin"] / "nvcc").unlink()
    env = {**w["env"], "PATH": f"{w['fakebin']}:/usr/bin:/bin"}
    r = subprocess.run(["bash", str(GPU_CHECK), "--build-dir", str(build), "--results",
                        str(tmp_path / "r2"), "--only", "kernel-tests"],
                       capture_output=True, text=True, timeout=60, env=env)
    if not Path("/usr/local/cuda/bin/nvcc").exists():
        assert r.returncode == 3 and "nvcc not found" in r.stderr
        assert not (tmp_path / "r2").exists()


def test_a_deadline_cuts_the_step_packs_its_piece_and_begins_no_other(gpu_world):
    w = gpu_world
    make_kernel_tests_hang(w)
    # 27 s less the 20 s kept back for packing: the step gets about 7 s of its 420.
    r = check(w, "--only", "kernel-tests,exec-tests", "--deadline", "27", timeout=50)
    assert r.returncode == 1, r.stdout + r.stderr
    tb = tarballs(w)
    assert set(tb) == {"kernel-tests"}  # exec-tests was never begun
    s, files = piece_summary(tb["kernel-tests"])
    assert s["status"] == "timed_out" and s["timed_out"] == ["cuda_kernel_tests"]
    assert s["deadline_s"] == 27
    assert 3 <= s["steps"][0]["seconds"] <= 20
    assert "partial output" in next(v for k, v in files.items() if k.endswith(".log"))
    run = next(w["results"].iterdir())
    assert json.loads((run / "summary.json").read_text())["pieces"] == {
        "kernel-tests": "timed_out", "exec-tests": "not_run"}


def test_sigterm_stops_the_step_and_packs_its_piece(gpu_world):
    w = gpu_world
    make_kernel_tests_hang(w)
    p = subprocess.Popen(["bash", str(GPU_CHECK), "--bundle", str(w["bundle"]), "--results",
                          str(w["results"]), "--out", str(w["out"]), "--only",
                          "kernel-tests,exec-tests"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=w["env"])
    deadline = time.monotonic() + 20
    log = None
    while time.monotonic() < deadline:  # until the step has started and written its first line
        log = next(w["results"].glob(".tmp-*kernel-tests*/cuda_kernel_tests.log"), None)
        if log is not None and "partial output" in log.read_text():
            break
        time.sleep(0.2)
    assert log is not None, "the step never started"
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 143, out + err
    assert time.monotonic() - t0 < 15  # not after the 60 s step
    tb = tarballs(w)
    assert set(tb) == {"kernel-tests"}
    s, files = piece_summary(tb["kernel-tests"])
    assert s["status"] == "timed_out"
    assert s["steps"][0]["reason"] == "stopped by SIGTERM"
    assert "partial output" in next(v for k, v in files.items() if k.endswith(".log"))
    assert not list(w["results"].glob(".tmp-*")) and not list(w["results"].glob(".common-*"))


FAKE_BENCH = r"""#!/usr/bin/env python3
import json, sys
out = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_out="))
runs = [{"name": "BM_Gemm/4096", "real_time": 1.0}]
if "ERR" in sys.argv[0]:
    runs.append({"name": "BM_Gemm/65536", "error_occurred": True,
                 "error_message": "cudaErrorMemoryAllocation: out of memory"})
json.dump({"benchmarks": runs}, open(out, "w"))
"""


def test_a_benchmark_that_reports_an_error_fails_the_piece(gpu_world):
    w = gpu_world
    for name in ("cuda_gemm_bench", "cuda_layer_benchERR"):
        write_exe(w["bundle"] / "bin" / name, FAKE_BENCH.replace("/usr/bin/env python3",
                                                                 sys.executable))
    r = check(w, "--only", "benchmarks")
    assert r.returncode == 1, r.stdout + r.stderr
    s, _ = piece_summary(tarballs(w)["benchmarks"])
    assert s["status"] == "failed" and s["failed"] == ["bench-cuda_layer_benchERR:errors"]
    step = next(x for x in s["steps"] if x["name"] == "bench-cuda_layer_benchERR:errors")
    assert step["reason"] == ("1 benchmark(s) reported an error, first BM_Gemm/65536: "
                              "cudaErrorMemoryAllocation: out of memory")


def test_what_a_benchmark_keeps_is_packed_with_its_json(gpu_world):
    # cuda_pipeline_bench's BM_Fidelity keeps each run's record, trace and profile in the folder
    # PPBENCH_BENCH_KEEP_DIR names; a benchmark that keeps nothing leaves no empty folder.
    w = gpu_world
    keeping = FAKE_BENCH + (
        "import os\n"
        "keep = os.environ['PPBENCH_BENCH_KEEP_DIR']\n"
        "if 'pipeline' in sys.argv[0]:\n"
        "    open(os.path.join(keep, 'fidelity-1f1b-D4-N8.trace.json'), 'w').write('{}')\n")
    for name in ("cuda_pipeline_bench", "cuda_gemm_bench"):
        write_exe(w["bundle"] / "bin" / name, keeping.replace("/usr/bin/env python3",
                                                              sys.executable))
    r = check(w, "--only", "benchmarks")
    assert r.returncode == 0, r.stdout + r.stderr
    with tarfile.open(tarballs(w)["benchmarks"]) as tf:
        names = tf.getnames()
    kept = [n for n in names if "/kept/" in n or n.endswith("/kept")]
    assert [n.split("/kept/")[-1] for n in kept if "/kept/" in n] == \
        ["fidelity-1f1b-D4-N8.trace.json"], names
    assert any(n.endswith("/cuda_gemm_bench.json") for n in names)


FAKE_BENCH_STOPPED = r"""#!/usr/bin/env python3
import json, sys, time
out = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_out="))
rows = [{"name": "BM_Layer/F", "real_time": 1.0}, {"name": "BM_Layer/I", "real_time": 2.0}]
text = json.dumps({"context": {"host_name": "vm"}, "benchmarks": rows}, indent=2)
cut = text[:text.index('"BM_Layer/I"') + 5]  # stopped while writing the second row
open(out, "w").write(cut[:20])  # what of the file stream's buffer reached the disk
print(cut[:text.index('"BM_Layer/I"')], flush=True)
time.sleep(60)
"""


def test_a_benchmark_stopped_at_its_limit_keeps_its_finished_rows(gpu_world):
    # The piece's limit stops the program mid-row: the rows that finished are in the tarball as
    # one whole JSON marked "cut", and the step is timed out.
    w = gpu_world
    write_exe(w["bundle"] / "bin" / "cuda_layer_bench",
              FAKE_BENCH_STOPPED.replace("/usr/bin/env python3", sys.executable))
    r = check(w, "--only", "benchmarks", "--piece-timeout", "2", timeout=40)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("bench-cuda_layer_bench: cut: 1 finished rows kept from the log, the last BM_Layer/F"
            in r.stdout)
    s, files = piece_summary(tarballs(w)["benchmarks"])
    assert s["status"] == "timed_out" and s["timed_out"] == ["bench-cuda_layer_bench"]
    kept = json.loads(next(v for k, v in files.items() if k.endswith("/cuda_layer_bench.json")))
    assert kept == {"context": {"host_name": "vm"},
                    "benchmarks": [{"name": "BM_Layer/F", "real_time": 1.0}],
                    "cut": {"source": "log", "rows": 1}}


def test_a_benchmark_that_sees_no_gpu_fails_the_piece_and_says_so(gpu_world):
    # A driver older than the bundle's CUDA runtime: the program says so, runs nothing, writes
    # no JSON and exits 0. The console names that, not the JSON file it did not write.
    w = gpu_world
    write_exe(w["bundle"] / "bin" / "cuda_layer_bench",
              "#!/bin/sh\necho 'cuda_layer_bench: skipped, no CUDA device visible "
              "(cudaErrorInsufficientDriver)'\n")
    r = check(w, "--only", "benchmarks")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "bench-cuda_layer_bench: saw no CUDA device although nvidia-smi lists one" in r.stdout
    assert "JSON output cannot be read" not in r.stdout
    s, _ = piece_summary(tarballs(w)["benchmarks"])
    assert s["status"] == "failed" and s["failed"] == ["bench-cuda_layer_bench:gpu"]


def test_in_a_gvisor_sandbox_the_sanitizer_and_ncu_are_unavailable(gpu_world):
    w = gpu_world
    write_exe(w["fakebin"] / "uname", "#!/bin/sh\necho 4.4.0\n")
    r = check(w, "--only", "sanitizer-memcheck,nvtx")
    assert r.returncode == 1, r.stdout + r.stderr  # named with --only: unavailable fails
    tb = tarballs(w)
    for piece, tool in (("sanitizer-memcheck", "compute-sanitizer"), ("nvtx", "ncu")):
        s, _ = piece_summary(tb[piece])
        assert s["status"] == "failed" and s["steps"] == [], piece
        assert s["kernel"] == "4.4.0"
        assert any("gVisor" in n and tool in n for n in s["notes"]), s["notes"]


def test_a_bundle_whose_programs_do_not_start_exits_3_and_writes_nothing(gpu_world):
    w = gpu_world
    write_exe(w["bundle"] / "bin" / "ppbench-cuda",
              "#!/bin/sh\necho \"ppbench-cuda: /lib/x86_64-linux-gnu/libc.so.6: version "
              "\\`GLIBC_2.36' not found\" >&2\nexit 1\n")
    r = check(w, "--only", "kernel-tests")
    assert r.returncode == 3, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not start on this machine" in lines[0]
    assert "GLIBC_2.36" in lines[0]
    assert not w["results"].exists() and not w["out"].exists()


# ------------------------------------------------------------------------------------------------
# The sweep part: scripts/sweep.py over a GPU spec, with the full fake ppbench of tests/scripts.

FULL_FAKE = SCRIPTS.parent / "tests" / "scripts" / "fake_ppbench.py"
SWEEP_SPEC = {"name": "cuda", "runs": [{
    "name": "mlp", "command": "run", "backend": "cuda", "virtual_devices": True,
    "workload": "mlp", "workload_flags": "--layers 8 --width 64", "microbatch_size": 4,
    "schedule": ["gpipe", "1f1b"], "devices": [1, 2, 4], "microbatches": [1, 4, 8, 32],
    "steps": 2, "warmup": 1, "dtype": "bf16"}]}


def sweep_world(w: dict) -> Path:
    """The bundle's ppbench and ppbench-cuda become the full fake; returns a small GPU spec."""
    for program in ("ppbench", "ppbench-cuda"):
        write_exe(w["bundle"] / "bin" / program,
                  f"#!/bin/sh\nexec '{sys.executable}' '{FULL_FAKE}' \"$@\"\n")
    w["env"]["FAKE_PPBENCH_GPU"] = "1"
    spec = w["tmp"] / "cuda.json"
    spec.write_text(json.dumps(SWEEP_SPEC))
    return spec


def sweep_rows(files: dict[str, str]) -> list[dict]:
    return [json.loads(line) for line in
            next(v for k, v in files.items() if k.endswith("/sweep/cuda.jsonl")).splitlines()]


def test_sweep_runs_the_subset_on_the_bundles_ppbench_and_records_it(gpu_world):
    w = gpu_world
    spec = sweep_world(w)
    r = check(w, "--only", "sweep", "--sweep-spec", spec)
    assert r.returncode == 0, r.stdout + r.stderr
    s, files = piece_summary(tarballs(w)["sweep"])
    assert s["status"] == "passed"
    rows = sweep_rows(files)
    # the default subset, N = 1, 4, 32: the spec's N = 8 is left out
    assert {(r["schedule"], r["devices"], r["microbatches"]) for r in rows} == {
        (sch, d, n) for sch in ("gpipe", "1f1b") for d in (1, 2, 4) for n in (1, 4, 32)}
    too_few = [r for r in rows if r["schedule"] == "1f1b" and r["microbatches"] < r["devices"]]
    assert {r["status"] for r in too_few} == {"invalid"}
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(len(r["gpu"]["sms_per_rank"]) == r["devices"] for r in ok)
    assert all(r["recorded_by"]["ppbench"].endswith("/bin/ppbench") for r in rows)
    assert s["sweep"]["ok"] == len(ok) and s["sweep"]["interrupted"] is False
    assert any(k.endswith("/sweep/cuda.csv") for k in files)


def test_sweep_only_all_runs_the_whole_spec_and_an_error_row_fails_the_piece(gpu_world):
    w = gpu_world
    spec = sweep_world(w)
    bad = dict(SWEEP_SPEC["runs"][0], schedule=["gpipe", "crash"], devices=[2], microbatches=[8])
    spec.write_text(json.dumps({"name": "cuda", "runs": [bad]}))
    r = check(w, "--only", "sweep", "--sweep-spec", spec, "--sweep-only", "all")
    assert r.returncode == 1, r.stdout + r.stderr
    s, files = piece_summary(tarballs(w)["sweep"])
    assert s["status"] == "failed"
    assert {r["schedule"]: r["status"] for r in sweep_rows(files)} == {"gpipe": "ok",
                                                                       "crash": "error"}


def zip_packages(path: Path, names: list[str]) -> None:
    """A wheel-shaped zip of the running Python's own copies of the packages `names`."""
    import importlib
    import zipfile
    with zipfile.ZipFile(path, "w") as z:
        for name in names:
            mod = importlib.import_module(name)
            src = Path(mod.__file__)
            if src.name == "__init__.py":
                for f in src.parent.rglob("*"):
                    if f.is_file() and "__pycache__" not in f.parts:
                        z.write(f, f.relative_to(src.parent.parent))
            else:
                z.write(src, src.name)


def test_sweep_in_a_bundle_unpacks_its_jsonschema_wheels_for_this_python(gpu_world):
    # The bundle's own gpu-check.sh (no .venv beside it) and a python3 that lacks jsonschema (-S:
    # no site-packages): the sweep imports it from the wheels this CPython can use, not the others.
    w = gpu_world
    spec = sweep_world(w)
    b = w["bundle"]
    shutil.copy(GPU_CHECK, b / "gpu-check.sh")
    (b / "scripts").mkdir()
    for h in ("gtest_summary.py", "results_io.py", "script_cli.py", "sweep.py", "sweep_point.py",
              "sweep_process.py", "sweep_records.py", "sweep_spec.py"):
        shutil.copy(SCRIPTS / h, b / "scripts" / h)
    (b / "benchmarks" / "sweeps").mkdir(parents=True)
    shutil.copy(SCRIPTS.parent / "benchmarks" / "sweeps" / "sweep.schema.json",
                b / "benchmarks" / "sweeps")
    shutil.copy(spec, b / "benchmarks" / "sweeps" / "cuda.json")
    write_exe(w["fakebin"] / "python3", f"#!/bin/sh\nexec '{sys.executable}' -S \"$@\"\n")
    r = subprocess.run(["bash", str(b / "gpu-check.sh"), "--only", "sweep", "--out", str(w["out"])],
                       capture_output=True, text=True, timeout=120, env=w["env"])
    assert r.returncode == 1 and "jsonschema" in r.stdout, r.stdout + r.stderr  # no wheels yet
    wheels = b / "wheels"
    wheels.mkdir()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    zip_packages(wheels / "deps-0-py3-none-any.whl",
                 ["jsonschema", "jsonschema_specifications", "referencing", "attr", "attrs",
                  "typing_extensions"])
    zip_packages(wheels / f"rpds_py-0-{tag}-{tag}-linux_x86_64.whl", ["rpds"])
    # another CPython's build, sorted after this one's: unpacked, it would break the import
    import zipfile
    with zipfile.ZipFile(wheels / "rpds_py-9-cp27-cp27mu-linux_x86_64.whl", "w") as z:
        z.writestr("rpds/__init__.py", "raise ImportError('the cp27 wheel was unpacked')\n")
    shutil.rmtree(w["out"])
    r = subprocess.run(["bash", str(b / "gpu-check.sh"), "--only", "sweep", "--out", str(w["out"])],
                       capture_output=True, text=True, timeout=120, env=w["env"])
    assert r.returncode == 0, r.stdout + r.stderr
    s, files = piece_summary(tarballs(w)["sweep"])
    assert s["status"] == "passed" and s["sweep"]["ok"] > 0


def test_a_later_call_on_the_same_machine_resumes_the_sweep_and_packs_both_calls(gpu_world):
    w = gpu_world
    spec = sweep_world(w)
    log = w["tmp"] / "calls.jsonl"
    w["env"]["FAKE_PPBENCH_LOG"] = str(log)
    r = check(w, "--only", "sweep", "--sweep-spec", spec, "--sweep-only", "schedule=gpipe")
    assert r.returncode == 0, r.stdout + r.stderr
    first_runs = sum(1 for line in log.read_text().splitlines() if json.loads(line)[0] == "run")
    shutil.rmtree(w["out"])
    log.unlink()
    time.sleep(1.1)  # a new call: another date, another folder
    r = check(w, "--only", "sweep", "--sweep-spec", spec)
    assert r.returncode == 0, r.stdout + r.stderr
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    assert {c[c.index("--schedule") + 1] for c in ran if c[0] == "run"} == {"1f1b"}
    _, files = piece_summary(tarballs(w)["sweep"])
    rows = sweep_rows(files)
    assert {r["schedule"] for r in rows} == {"gpipe", "1f1b"} and first_runs > 0
    # gpipe at every N of the spec (--sweep-only replaced the default subset), then 1f1b at 1, 4, 32
    assert len(rows) == 3 * 4 + 3 * 3
