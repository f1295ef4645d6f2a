"""scripts/plot_memory_step.py against a stand-in `ppbench` that answers `list` and `memory`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import SCRIPTS

# Answers `list --format json` with three families and `memory ... --format json` with one rank
# per --devices, rank r holding r + 1 GiB of activations; logs every call's argv.
FAKE = r'''
import json, sys
args = sys.argv[1:]
with open(LOG, "a") as f:
    f.write(json.dumps(args) + "\n")
if args[0] == "list":
    print(json.dumps({"schedules": [{"name": n} for n in ("gpipe", "1f1b", "chimera")]}))
    sys.exit(0)
if "--seq" in args and args[args.index("--seq") + 1] == "666":
    print("ppbench: error: --seq 666 is not allowed", file=sys.stderr)
    sys.exit(2)
d = int(args[args.index("--devices") + 1])
g = 1 << 30
ranks = []
for r in range(d):
    b = {"params": 2 * g, "grads": 2 * g, "optimizer": 12 * g, "activations": (r + 1) * g,
         "comm": g // 4}
    b["total"] = sum(b.values())
    ranks.append({"rank": r, "bytes": b})
print(json.dumps({"stages": d, "ranks": ranks}))
'''


def fake(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "calls.jsonl"
    exe = tmp_path / "ppbench"
    exe.write_text(f"#!{sys.executable}\nLOG = {str(log)!r}\n{FAKE}")
    exe.chmod(0o755)
    return exe, log


def run_script(exe: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / "plot_memory_step.py"), "--ppbench",
                           str(exe), "--out-dir", str(out)], capture_output=True, text=True,
                          timeout=300)


def test_writes_both_figures_from_the_memory_records(tmp_path):
    exe, log = fake(tmp_path)
    r = run_script(exe, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    for name in ("memory_8b_pp_seq.png", "memory_per_rank_d4.png"):
        png = tmp_path / "out" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    memory = [c for c in calls if c[0] == "memory"]
    # Figure 1: 1F1B at D = 1, 2, 4, 8 with N = 2D for each of five sequence lengths.
    points = {(c[c.index("--seq") + 1], c[c.index("--devices") + 1],
               c[c.index("--microbatches") + 1]) for c in memory
              if c[c.index("--schedule") + 1] == "1f1b"}
    for seq in ("1024", "2048", "4096", "8192", "16384"):
        for d in (1, 2, 4, 8):
            assert (seq, str(d), str(2 * d)) in points
    # Figure 2: every listed family at D = 4, N = 8, seq 4096.
    per_rank = {c[c.index("--schedule") + 1] for c in memory
                if c[c.index("--devices") + 1] == "4" and c[c.index("--microbatches") + 1] == "8"
                and c[c.index("--seq") + 1] == "4096"}
    assert per_rank >= {"gpipe", "1f1b", "chimera"}
    for c in memory:
        assert c[c.index("--optimizer") + 1] == "adamw"
        assert c[c.index("--dtype") + 1] == "bf16"
        assert c[-2:] == ["--format", "json"]


def test_a_failing_ppbench_stops_with_its_message(tmp_path):
    exe, _ = fake(tmp_path)
    script = (SCRIPTS / "plot_memory_step.py").read_text()
    assert "16384" in script  # the sequence lengths the fake refuses are not among them
    patched = tmp_path / "plot_memory_step.py"
    patched.write_text(script.replace("seqs = [1024,", "seqs = [666,"))
    r = subprocess.run([sys.executable, str(patched), "--ppbench", str(exe), "--out-dir",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(SCRIPTS)})
    assert r.returncode == 2  # ppbench's own refusal: bad input
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--seq 666" in lines[0] and "is not allowed" in lines[0], r.stderr
