"""scripts/gpu_equivalence.py's table (equivalence.txt): one column per D, the variant and
schedule columns as wide as their longest name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import gpu_equivalence
from conftest import ROOT


def test_the_longest_variant_does_not_run_into_its_schedule(tmp_path: Path):
    variants = [name for name, _ in gpu_equivalence.VARIANTS]
    rec = gpu_equivalence.Recorder(tmp_path, [2, 4], variants)
    rec.schedules = ["1f1b", "interleaved-1f1b"]
    for v in variants:
        for s in rec.schedules:
            for d in (2, 4):
                rec.add({"equivalence": {"variant": v, "schedule": s, "devices": d,
                                         "status": "passed", "microbatches": 2 * d,
                                         "max_rel_error": 1e-7, "label": f"{v}/{s}/D{d}"}})
    lines = rec.table("").splitlines()
    rows = [line for line in lines[1:] if line.strip() and not line.startswith("passed")]
    assert len(rows) == len(variants) * 2
    start = lines[0].index("schedule")
    for row in rows:
        variant, schedule = row.split()[:2]  # each name stands alone
        assert variant in variants and schedule in rec.schedules, row
        assert row.index(schedule, len(variant)) == start, row  # the same column on every row
        assert row[start - 1] == " ", row
    assert lines[-1] == f"passed: {len(rows) * 2}"


def test_the_list_table_gives_every_name_and_no_continued_description():
    ppbench = ROOT / "build" / "ppbench"
    table = ("schedule          constraints                              description\n"
             "naive             D >= 1, N >= 1                           naive model parallelism\n"
             "interleaved-1f1b  --chunks v >= 2 (default 2); --group-size g (default D), long\n"
             "                                                           megatron's interleaved\n"
             "zb-v              any N >= 1 (zero bubble needs N >= 2D-1)\n"
             "                                                           zero bubble zb-v\n"
             "\nD = --devices\n")
    assert gpu_equivalence.parse_list_text(table) == ["naive", "interleaved-1f1b", "zb-v"]
    if ppbench.exists():  # the real table gives the names its JSON gives
        text = subprocess.run([str(ppbench), "list"], capture_output=True, text=True).stdout
        assert gpu_equivalence.parse_list_text(text) == gpu_equivalence.schedules([str(ppbench)])
