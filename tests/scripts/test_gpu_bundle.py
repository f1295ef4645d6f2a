"""Tests of the GPU bundle's launcher (scripts/gpu-bundle-run.sh, copied to <bundle>/run) with fake
bundles and fake library folders, and of scripts/gpu-bundle.sh's arguments. Nothing is built: the
bundle itself needs nvcc and minutes (`make gpu-bundle`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, SCRIPTS

LAUNCHER = SCRIPTS / "gpu-bundle-run.sh"
GPU_BUNDLE = SCRIPTS / "gpu-bundle.sh"


def write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def touch_lib(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("not really a library\n")
    return folder


def make_bundle(tmp: Path, env_lines: str = "") -> Path:
    """A bundle folder with the real launcher and one program that prints its environment."""
    b = tmp / "gpu-bundle"
    (b / "lib").mkdir(parents=True)
    shutil.copy(LAUNCHER, b / "run")
    (b / "run").chmod(0o755)
    (b / "bundle.env").write_text(
        "BUNDLE_COMMIT=0123abc\nBUNDLE_DIRTY=false\n"
        "BUNDLE_CUBLAS_SONAMES='libcublasLt.so.13'\nBUNDLE_NCCL_SONAME=libnccl.so.2\n"
        "BUNDLE_NCCL_REQUIRED=0\n" + env_lines)
    write_exe(b / "bin" / "ppbench",
              "#!/bin/sh\necho \"LD_LIBRARY_PATH=$LD_LIBRARY_PATH\"\n"
              "echo \"PPBENCH_GIT_COMMIT=$PPBENCH_GIT_COMMIT\"\necho \"ARGS=$*\"\n")
    write_exe(b / "bin" / "cuda_kernel_tests", "#!/bin/sh\necho tests\n")
    return b


@pytest.fixture
def world(tmp_path: Path) -> dict:
    """Fake places: PATH with a python3 that names a site-packages folder and an ldconfig that
    lists what ldconfig.txt holds; an empty 'system CUDA' folder."""
    fakebin = tmp_path / "fakebin"
    site = tmp_path / "site-packages"
    site.mkdir()
    write_exe(fakebin / "python3", f"#!/bin/sh\necho '{site}'\n")
    ldconf = tmp_path / "ldconfig.txt"
    ldconf.write_text("")
    write_exe(fakebin / "ldconfig", f"#!/bin/sh\ncat '{ldconf}'\n")
    system = tmp_path / "system-cuda"
    system.mkdir()
    env = {**os.environ, "PATH": f"{fakebin}:{os.environ['PATH']}",
           "PPBENCH_BUNDLE_SYSTEM_DIRS": str(system), "TMPDIR": str(tmp_path)}
    for k in ("PPBENCH_CUDA_LIB_DIRS", "PPBENCH_GIT_COMMIT", "PPBENCH_BUNDLE_QUIET",
              "PPBENCH_BUNDLE_PYTHON", "LD_LIBRARY_PATH"):
        env.pop(k, None)
    return {"env": env, "site": site, "system": system, "ldconfig": ldconf, "tmp": tmp_path}


def launch(bundle: Path, args, env) -> subprocess.CompletedProcess:
    return subprocess.run([str(bundle / "run"), *args], capture_output=True, text=True,
                          timeout=30, env=env)


def test_search_order_env_dirs_then_system_then_ldconfig_then_wheels(world):
    b = make_bundle(world["tmp"])
    env = dict(world["env"])
    mine = touch_lib(world["tmp"] / "mine", "libcublasLt.so.13")
    touch_lib(world["system"], "libcublasLt.so.13")
    viacache = touch_lib(world["tmp"] / "ldcache", "libcublasLt.so.13")
    world["ldconfig"].write_text(
        f"\tlibcublasLt.so.13 (libc6,x86-64) => {viacache}/libcublasLt.so.13\n")
    wheel = touch_lib(world["site"] / "nvidia" / "cu13" / "lib", "libcublasLt.so.13")
    touch_lib(world["site"] / "nvidia" / "nccl" / "lib", "libnccl.so.2")

    env["PPBENCH_CUDA_LIB_DIRS"] = f"{world['tmp'] / 'nothing-here'}:{mine}"
    r = launch(b, ["--check"], env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"gpu-bundle: cuBLASLt 13 from {mine} (PPBENCH_CUDA_LIB_DIRS); "
        f"NCCL 2 from {world['site']}/nvidia/nccl/lib (python wheel)"]

    del env["PPBENCH_CUDA_LIB_DIRS"]
    r = launch(b, ["--check"], env)
    assert f"cuBLASLt 13 from {world['system']} (system CUDA)" in r.stderr

    (world["system"] / "libcublasLt.so.13").unlink()
    r = launch(b, ["--check"], env)
    assert f"cuBLASLt 13 from {viacache} (ldconfig)" in r.stderr

    world["ldconfig"].write_text("")
    r = launch(b, ["--check"], env)
    assert f"cuBLASLt 13 from {wheel} (python wheel)" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_exec_sets_the_library_path_and_the_commit(world):
    b = make_bundle(world["tmp"])
    env = dict(world["env"])
    mine = touch_lib(world["tmp"] / "mine", "libcublasLt.so.13")
    env["PPBENCH_CUDA_LIB_DIRS"] = str(mine)
    env["LD_LIBRARY_PATH"] = "/already/there"
    r = launch(b, ["ppbench", "run", "--x"], env)
    assert r.returncode == 0, r.stderr
    out = dict(line.split("=", 1) for line in r.stdout.splitlines())
    assert out["LD_LIBRARY_PATH"].split(":") == [str(b / "lib"), str(mine), "/already/there"]
    assert out["PPBENCH_GIT_COMMIT"] == "0123abc"  # from the manifest
    assert out["ARGS"] == "run --x"
    assert "NCCL 2 not found (only --gpus with more than one GPU needs it)" in r.stderr
    # A commit already set wins; PPBENCH_BUNDLE_QUIET silences the line.
    r = launch(b, ["ppbench"], {**env, "PPBENCH_GIT_COMMIT": "feed", "PPBENCH_BUNDLE_QUIET": "1"})
    assert "PPBENCH_GIT_COMMIT=feed" in r.stdout
    assert r.stderr == ""


def test_missing_cublas_exits_3_naming_what_was_searched(world):
    b = make_bundle(world["tmp"])
    env = {**world["env"], "PPBENCH_CUDA_LIB_DIRS": str(world["tmp"] / "empty")}
    r = launch(b, ["ppbench", "--version"], env)
    assert r.returncode == 3
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for word in ("libcublasLt.so.13 not found", str(world["tmp"] / "empty"),
                 str(world["system"]), "PPBENCH_CUDA_LIB_DIRS"):
        assert word in lines[0]
    assert r.stdout == ""  # the program did not start


def test_nccl_linked_by_the_programs_is_required(world):
    b = make_bundle(world["tmp"], "BUNDLE_NCCL_REQUIRED=1\n")
    touch_lib(world["system"], "libcublasLt.so.13")
    r = launch(b, ["ppbench"], world["env"])
    assert r.returncode == 3
    assert "libnccl.so.2 not found" in r.stderr


def test_both_cublas_sonames_come_from_one_folder(world):
    b = make_bundle(world["tmp"], "BUNDLE_CUBLAS_SONAMES='libcublasLt.so.13 libcublas.so.13'\n")
    touch_lib(world["system"], "libcublasLt.so.13")  # only one of the two: not a match
    both = world["site"] / "nvidia" / "cublas" / "lib"
    touch_lib(both, "libcublasLt.so.13")
    touch_lib(both, "libcublas.so.13")
    r = launch(b, ["--check"], world["env"])
    assert r.returncode == 0, r.stderr
    assert f"cuBLASLt 13 + cuBLAS 13 from {both} (python wheel)" in r.stderr


def test_a_versioned_file_without_its_soname_link_gets_one(world):
    b = make_bundle(world["tmp"])
    touch_lib(world["system"], "libcublasLt.so.13.1.0")
    r = launch(b, ["ppbench"], world["env"])
    assert r.returncode == 0, r.stderr
    ld = dict(line.split("=", 1) for line in r.stdout.splitlines())["LD_LIBRARY_PATH"].split(":")
    link = Path(ld[1]) / "libcublasLt.so.13"
    assert link.is_symlink()
    assert link.resolve() == (world["system"] / "libcublasLt.so.13.1.0").resolve()


def test_unknown_program_exits_2_listing_the_programs(world):
    b = make_bundle(world["tmp"])
    r = launch(b, ["nosuch"], world["env"])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'nosuch'" in lines[0]
    assert "cuda_kernel_tests" in lines[0] and "ppbench" in lines[0]
    assert launch(b, [], world["env"]).returncode == 2
    r = launch(b, ["--list"], world["env"])
    assert r.stdout.split() == ["cuda_kernel_tests", "ppbench"]


def test_gpu_bundle_script_usage():
    r = subprocess.run(["bash", str(GPU_BUNDLE), "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for word in ("--out", "--build-dir", "64 MiB", "PPBENCH_PORTABLE", "90-real;90-virtual"):
        assert word in r.stdout
    for args, word in ((["--frob"], "--frob"), (["--out"], "--out"), (["--jobs", "x"], "'x'")):
        r = subprocess.run(["bash", str(GPU_BUNDLE), *args], capture_output=True, text=True)
        assert r.returncode == 2
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0], r.stderr


def test_an_out_folder_that_is_not_a_bundle_is_refused_before_anything(tmp_path):
    # --out is replaced whole once the bundle is built: a mistyped folder would be deleted.
    keep = tmp_path / "results"
    keep.mkdir()
    (keep / "precious.jsonl").write_text("{}\n")
    r = subprocess.run(["bash", str(GPU_BUNDLE), "--out", str(keep)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a bundle (no bundle.env)" in lines[0], r.stderr
    assert (keep / "precious.jsonl").read_text() == "{}\n"


def test_the_bundle_lists_its_programs_once_and_carries_the_check():
    text = GPU_BUNDLE.read_text()
    targets = re.search(r"^TARGETS=\((.*)\)$", text, re.M).group(1).split()
    assert targets == ["ppbench", "ppbench-cuda", "cuda_kernel_tests", "cuda_exec_tests",
                       "cuda_gemm_bench", "cuda_layer_bench", "cuda_pipeline_bench"]
    helpers = re.search(r"^HELPERS=\(([^)]*)\)", text, re.M).group(1).split()
    # Every script gpu-check.sh runs from its helper folder is carried.
    check = (SCRIPTS / "gpu-check.sh").read_text()
    used = set(re.findall(r'\$HELPERS/([A-Za-z0-9_.-]+)', check))
    assert used <= set(helpers), used - set(helpers)
    # ... and what those import from scripts/.
    for h in helpers:
        for mod in re.findall(r"^from (\w+) import", (SCRIPTS / h).read_text(), re.M):
            if (SCRIPTS / f"{mod}.py").exists():
                assert f"{mod}.py" in helpers, (h, mod)
    # The sweep part's default spec and the schema sweep.py checks it with travel too, where
    # the bundle's own scripts/ look for them (beside it, as in the repository).
    files = re.search(r"^SWEEP_FILES=\(([^)]*)\)", text, re.M).group(1).split()
    assert "benchmarks/sweeps/cuda.json" in files and "benchmarks/sweeps/cuda.json" in check
    import sweep_spec
    assert str(sweep_spec.SCHEMA_PATH.relative_to(SCRIPTS.parent)) in files


def test_make_target_gitignore_and_cmake_option():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^gpu-bundle:.*## ", make, re.M)
    ignore = (ROOT / ".gitignore").read_text().splitlines()
    assert {"/gpu-bundle/", "/gpu-bundle.tar.gz", "/build-bundle/"} <= set(ignore)
    top = (ROOT / "CMakeLists.txt").read_text()
    assert "option(PPBENCH_PORTABLE" in top and "CUDA::cudart_static" in top
    # Every CUDA target links the runtime through PPBENCH_CUDART, so PORTABLE can make it static.
    for cm in ROOT.glob("*/**/CMakeLists.txt"):
        if "build" in cm.parts[len(ROOT.parts)]:
            continue
        assert "CUDA::cudart " not in cm.read_text() and "CUDA::cudart)" not in cm.read_text(), cm


def test_a_glibc_older_than_the_bundle_needs_exits_3_with_one_line(world):
    touch_lib(world["system"], "libcublasLt.so.13")
    # getconf names this machine's glibc; the bundle asks for a newer one, then for an older one
    write_exe(world["tmp"] / "fakebin" / "getconf", "#!/bin/sh\necho 'glibc 2.35'\n")
    b = make_bundle(world["tmp"], "BUNDLE_GLIBC=2.36\n")
    for args in (["--check"], ["ppbench", "--version"]):
        r = launch(b, args, world["env"])
        assert r.returncode == 3, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "glibc is 2.35, older than the 2.36" in lines[0], r.stderr
        assert "ARGS=" not in r.stdout
    (b / "bundle.env").write_text((b / "bundle.env").read_text().replace("2.36", "2.35"))
    r = launch(b, ["ppbench", "--version"], world["env"])
    assert r.returncode == 0 and "ARGS=--version" in r.stdout, r.stderr


def test_glibc_needed_takes_static_programs_which_ask_for_nothing(tmp_path):
    # The bundle holds a static ppbench: objdump finds no dynamic symbols in it and fails, which
    # once ended gpu-bundle.sh (pipefail) after the whole build, with no bundle written.
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "hello.c"
    src.write_text("#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n")
    static, dynamic = tmp_path / "static", tmp_path / "dynamic"
    if subprocess.run([cc, "-static", "-o", str(static), str(src)]).returncode != 0:
        pytest.skip("no static C library to link against")
    subprocess.run([cc, "-o", str(dynamic), str(src)], check=True)
    helper = SCRIPTS / "glibc-needed.sh"

    def needed(*files):
        return subprocess.run([str(helper), *map(str, files)], capture_output=True, text=True,
                              timeout=30)

    alone = needed(static)
    assert alone.returncode == 0 and alone.stdout.strip() == "", alone.stderr
    both = needed(static, dynamic)
    assert both.returncode == 0, both.stderr
    assert re.fullmatch(r"2\.\d+", both.stdout.strip()), both.stdout
    assert needed(dynamic).stdout == both.stdout  # the static one adds nothing
    missing = needed(tmp_path / "nothing")
    assert missing.returncode == 2 and "no file" in missing.stderr
    # gpu-bundle.sh asks the helper, so a static program in the bundle cannot end it.
    assert "glibc-needed.sh" in GPU_BUNDLE.read_text()


@pytest.mark.parametrize("during_build", [
    "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m later",
    "echo edit >> tracked.txt",
])
def test_a_tree_that_changes_while_the_programs_build_stops_the_bundle(tmp_path, during_build):
    # The script in a repository of its own, with fake nvcc and cmake: the "build" commits or
    # edits a tracked file, so the manifest's commit would not be the programs' own.
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(GPU_BUNDLE, repo / "scripts" / "gpu-bundle.sh")
    (repo / "tracked.txt").write_text("v1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    fakebin = tmp_path / "fakebin"
    write_exe(fakebin / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.1'\n")
    write_exe(fakebin / "cmake", f"""#!/bin/sh
case "$1" in
  --build) cd '{repo}' && {during_build} ;;
  *) echo "-- building the CUDA parts" ;;
esac
""")
    env = {**os.environ, "PATH": f"{fakebin}:{os.environ['PATH']}"}
    r = subprocess.run(["bash", str(repo / "scripts" / "gpu-bundle.sh"), "--out",
                        str(tmp_path / "bundle")], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "the tree changed while the programs were built" in lines[0]
    assert not (tmp_path / "bundle").exists()


PACK = SCRIPTS / "pack-bundle.sh"


def pack(folder, env=None):
    return subprocess.run([str(PACK), str(folder)], capture_output=True, text=True, timeout=60,
                          env=env)


def test_the_packed_bundle_unpacks_to_the_same_folder_and_its_programs_run(tmp_path, world):
    """What a device call carries: `tar -xzf gpu-bundle.tar.gz` elsewhere gives back every file
    with its bytes and execute bits, owned by root, and the launcher runs its program from there."""
    touch_lib(world["system"], "libcublasLt.so.13")
    b = make_bundle(world["tmp"])
    (b / "bundle.json").write_text('{"commit": "0123abc"}\n')
    r = pack(b)
    assert r.returncode == 0, r.stderr
    archive = b.parent / "gpu-bundle.tar.gz"
    assert int(r.stdout) == archive.stat().st_size > 0
    assert [p.name for p in b.parent.iterdir() if p.name.startswith("gpu-bundle.tar.gz.")] == []
    listing = subprocess.run(["tar", "-tvzf", str(archive)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    assert all(line.split()[1] in ("0/0", "root/root") for line in listing), listing
    names = [line.split()[-1] for line in listing]
    assert names[0] == "gpu-bundle/" and all(n.startswith("gpu-bundle/") for n in names)
    there = tmp_path / "device"
    there.mkdir()
    subprocess.run(["tar", "-xzf", str(archive)], cwd=there, check=True)
    got = there / "gpu-bundle"
    mine = sorted(p.relative_to(b) for p in b.rglob("*"))
    assert sorted(p.relative_to(got) for p in got.rglob("*")) == mine
    for rel in mine:
        if (b / rel).is_file():
            assert (got / rel).read_bytes() == (b / rel).read_bytes(), rel
            assert os.access(got / rel, os.X_OK) == os.access(b / rel, os.X_OK), rel
    r = launch(got, ["ppbench", "--version"], world["env"])
    assert r.returncode == 0 and "ARGS=--version" in r.stdout, r.stderr


def test_packing_again_replaces_the_archive_and_a_failure_leaves_none(tmp_path):
    b = tmp_path / "gpu-bundle"
    write_exe(b / "bin" / "ppbench", "#!/bin/sh\necho one\n")
    assert pack(b).returncode == 0
    write_exe(b / "bin" / "ppbench", "#!/bin/sh\necho two\n")
    assert pack(b).returncode == 0
    out = subprocess.run(["tar", "-xOzf", str(tmp_path / "gpu-bundle.tar.gz"),
                          "gpu-bundle/bin/ppbench"], capture_output=True, text=True, check=True)
    assert out.stdout == "#!/bin/sh\necho two\n"
    # gzip that fails half-way: no archive, no temporary file, one line, exit 1
    fake = tmp_path / "fakebin"
    write_exe(fake / "gzip", "#!/bin/sh\nhead -c 100\nexit 1\n")
    (tmp_path / "gpu-bundle.tar.gz").unlink()
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    r = pack(b, env)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"pack-bundle: could not pack {b} into {b}.tar.gz"], r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fakebin", "gpu-bundle"]


@pytest.mark.parametrize("args, word", [([], "usage"), (["a", "b"], "usage"),
                                        (["/nonexistent/x"], "/nonexistent/x"), (["/"], "root")])
def test_pack_bundle_bad_usage_exits_2_naming_the_value(args, word):
    r = subprocess.run([str(PACK), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and word in r.stderr, r
