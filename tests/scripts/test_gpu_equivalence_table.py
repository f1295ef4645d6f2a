"""scripts/gpu_equivalence.py's table (equivalence.txt): one column per D, the variant and
schedule columns as wide as their longest name."""

from __future__ import annotations

from pathlib import Path

import gpu_equivalence


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
