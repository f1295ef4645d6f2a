"""The sweep spec loader under specs nobody wrote by hand: each committed spec, mutated at random
(keys dropped, added or given values of every JSON type, lists emptied, numbers made huge or
NaN), is either accepted or refused with SpecError and one line. Anything else escaping
load_spec would be a crash of `make bench` instead of exit 2. Seeded: the same cases every run."""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest

import sweep_spec

SPECS = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "sweeps").glob("*.json"))
SPECS = [p for p in SPECS if p.name != "sweep.schema.json"]
VALUES = [None, True, False, 0, -1, 1, 2.5, 1e308, float("inf"), float("nan"), "", "x", "1f1b",
          [], [1], [0], ["gpipe"], {}, {"a": 1}, 2**70, "\x1b[2J", [None], [[1]]]
CASES = 300


def mutate(rng: random.Random, node, depth: int = 0) -> None:
    """One change somewhere inside `node` (a dict or list, changed in place)."""
    if isinstance(node, dict) and node:
        key = rng.choice(sorted(node))
        r = rng.random()
        if r < 0.2:
            del node[key]
        elif r < 0.3:
            node[rng.choice(["unknown_key", "runs", "name", "devices", "timeout"])] = \
                copy.deepcopy(rng.choice(VALUES))
        elif r < 0.6 or depth > 3:
            node[key] = copy.deepcopy(rng.choice(VALUES))
        else:
            mutate(rng, node[key], depth + 1)
    elif isinstance(node, list) and node:
        i = rng.randrange(len(node))
        r = rng.random()
        if r < 0.2:
            del node[i]
        elif r < 0.5 or depth > 3:
            node[i] = copy.deepcopy(rng.choice(VALUES))
        else:
            mutate(rng, node[i], depth + 1)


def test_committed_specs_are_there():
    assert {p.name for p in SPECS} >= {"cpu.json", "cuda.json", "theory.json"}


def test_mutated_specs_are_accepted_or_refused_in_one_line(tmp_path):
    pytest.importorskip("jsonschema")
    rng = random.Random(20261127)
    specs = [json.loads(p.read_text()) for p in SPECS]
    path = tmp_path / "spec.json"
    outcomes = {"accepted": 0, "refused": 0}
    for _ in range(CASES):
        spec = copy.deepcopy(rng.choice(specs))
        for _ in range(rng.randint(1, 3)):
            mutate(rng, spec)
        path.write_text(json.dumps(spec))
        try:
            sweep_spec.load_spec(path)
            outcomes["accepted"] += 1
        except sweep_spec.SpecError as e:
            assert "\n" not in str(e), str(e)
            outcomes["refused"] += 1
    # Both sides were reached, or the mutations tested nothing.
    assert outcomes["accepted"] > 0 and outcomes["refused"] > 0, outcomes
