"""A sweep spec: read it, check it against benchmarks/sweeps/sweep.schema.json, expand it.

load_spec turns a spec file into its points (the cartesian product of each group, without
duplicates) or one line naming the file, the group, the key and what is allowed (SpecError,
exit 2); a check that cannot run (jsonschema missing) is a MachineError (exit 3).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import script_cli
from results_io import finite_float, reject_constant
from script_cli import InputError, shown
from sweep_point import COMMANDS, RUN_KEYS, SPEC_KEYS, Point, make_point

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "benchmarks" / "sweeps" / "sweep.schema.json"

# Keys of a group that describe it rather than its points; a run group's "min_gpus": it runs
# only where nvidia-smi lists at least that many GPUs.
GROUP_META_KEYS = ("name", "description")
RUN_GROUP_META_KEYS = GROUP_META_KEYS + ("min_gpus",)


class SpecError(InputError):
    """A bad spec or option: one line for the user, exit 2."""


class MachineError(script_cli.MachineError):
    """The machine or environment stops the sweep (a module missing, the prefix locked): exit 3."""


# The most points one group may expand to. Expansion holds every point in memory (inside
# stop_signals, where Ctrl-C is only noted), so a spec whose axes multiply to billions would
# run for minutes and end in MemoryError; a million points is already weeks of ppbench runs.
MAX_GROUP_POINTS = 1_000_000

# The largest spec file read: the specs in benchmarks/sweeps/ are a few KiB.
MAX_SPEC_BYTES = 64 << 20


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def expand_spec(spec: dict) -> list[Point]:
    """The cartesian product of every group, in order, without duplicates.

    Checks what make_point checks (known command and keys, the required ones, virtual_devices
    only with cuda) and raises ValueError naming the group; load_spec checks the schema first.
    """
    if not isinstance(spec.get("runs"), list):
        raise ValueError("spec needs a 'runs' list of parameter groups")
    points: dict[tuple, Point] = {}
    for i, group in enumerate(spec["runs"]):
        where = group_text(i, group)
        if not isinstance(group, dict):
            raise ValueError(f"{where}: a group is a JSON object, got {short_json(group)}")
        command = group.get("command", "simulate")
        if command not in COMMANDS:
            raise ValueError(f"{where}: unknown command '{command}' (known: {', '.join(COMMANDS)})")
        keys = RUN_KEYS if command == "run" else ("command",) + SPEC_KEYS
        meta = RUN_GROUP_META_KEYS if command == "run" else GROUP_META_KEYS
        unknown = set(group) - set(keys) - set(meta)
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} for command "
                             f"'{command}' (known: {', '.join(keys + meta)})")
        required = ("schedule", "devices", "microbatches") + (
            ("workload",) if command == "run" else ())
        for key in required:
            if key not in group:
                raise ValueError(f"{where}: missing '{key}'")
        names = [k for k in keys if k != "command"]
        lists = [as_list(group.get(k)) for k in names]
        # Counted from the list lengths before anything is expanded (see MAX_GROUP_POINTS).
        count = math.prod(len(values) for values in lists)
        if count > MAX_GROUP_POINTS:
            raise ValueError(f"{where}: its lists multiply to {count:,} points; allowed: at most "
                             f"{MAX_GROUP_POINTS:,} per group (split it or shorten a list)")
        for values in itertools.product(*lists):
            try:
                point = make_point(command=command, **dict(zip(names, values)))
            except (TypeError, ValueError) as e:
                raise ValueError(f"{where}: {e}") from None
            points.setdefault(point.key(), point)
    return list(points.values())


def group_text(index: int, group: Any) -> str:
    """runs[1] ("transformer"): the group by index, and by name when it has one."""
    name = group.get("name") if isinstance(group, dict) else None
    return f'runs[{index}]' + (f' ("{name}")' if isinstance(name, str) and name else "")


def short_json(value: Any, limit: int = 60) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# --- checking a spec -----------------------------------------------------------------------

def load_spec(path: Path) -> tuple[dict, list[Point]]:
    """Read, check against the schema and expand a spec; SpecError (exit 2) with one line
    naming the file, the group and the key; MachineError (exit 3) without jsonschema."""
    try:
        spec = parse_spec(script_cli.read_text(path, "spec", MAX_SPEC_BYTES), str(path))
    except InputError as e:
        raise SpecError(str(e)) from None
    # The text first: a control character is named as such, not as a value the schema
    # has no pattern for.
    problem = text_problem(spec) or schema_problem(spec)
    if problem:
        raise SpecError(f"{path}: {problem}")
    try:
        points = expand_spec(spec)
    except ValueError as e:
        raise SpecError(f"{path}: {e}") from None
    return spec, points


def parse_spec(text: str, where: str) -> Any:
    """The spec's JSON with every number finite: NaN and Infinity are refused, and so is a
    number too large for a double (1e999, which Python would read as inf and pass on to
    ppbench and into the records), and an integer of more digits than Python reads.
    InputError naming the value."""
    try:
        return json.loads(text, parse_float=finite_float, parse_int=whole_number,
                          parse_constant=reject_constant)
    except (RecursionError, json.JSONDecodeError):
        # The syntax errors, worded as everywhere else (parse_json raises them again).
        return script_cli.parse_json(text, where, parse_constant=reject_constant)
    except ValueError as e:  # finite_float's or reject_constant's
        raise InputError(f"{where}: not JSON this program can read ({e})") from None


def whole_number(text: str) -> int:
    """json.loads's parse_int: an integer of up to sys.get_int_max_str_digits() digits (Python
    refuses more, in words about its own settings); ValueError naming its length."""
    digits = len(text.lstrip("-"))
    cap = sys.get_int_max_str_digits()
    if cap and digits > cap:
        raise ValueError(f"an integer of {digits} digits ({shown(text, 20)}); allowed: at most "
                         f"{cap} digits")
    return int(text)


def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def schema_problem(spec: Any) -> str | None:
    """The first problem of spec against benchmarks/sweeps/sweep.schema.json as one line
    (where, which key, what is allowed), or None when it conforms."""
    try:
        import jsonschema
    except ImportError:
        raise MachineError("the Python module jsonschema is not installed (needed to check sweep "
                           "specs): install it with '.venv/bin/pip install -r "
                           "scripts/requirements.txt' (or 'make deps')") from None
    schema = load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(spec))
    if error is None:
        return None
    return describe_schema_error(error, spec, schema)


def key_description(schema: dict, group: Any, key: str) -> str:
    """The schema's description of key: a group key (simulate or run group) or a top-level one."""
    defs = schema["$defs"]
    if group is None:
        prop = schema["properties"].get(key, {})
    else:
        kind = "runGroup" if isinstance(group, dict) and group.get("command") == "run" \
            else "simulateGroup"
        prop = defs[kind]["properties"].get(key, {})
    if "description" not in prop and "$ref" in prop:
        prop = defs[prop["$ref"].rsplit("/", 1)[1]]
    return prop.get("description", "")


def group_keys(schema: dict, group: Any) -> tuple[str, list[str], list[str]]:
    kind = "run" if isinstance(group, dict) and group.get("command") == "run" else "simulate"
    body = schema["$defs"][f"{kind}Group"]
    return kind, list(body["properties"]), list(body["required"])


def describe_schema_error(error: Any, spec: Any, schema: dict) -> str:
    path = list(error.absolute_path)
    group = None
    if len(path) >= 2 and path[0] == "runs" and isinstance(path[1], int):
        group = spec["runs"][path[1]]
        where = group_text(path[1], group)
        rest = path[2:]
    else:
        where = "top level"
        rest = path
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else "?"
        if group is None and not rest:
            return (f"{where}: missing key \"{missing}\"; allowed: "
                    f"{key_description(schema, None, missing)}")
        kind, _, required = group_keys(schema, group)
        return (f"{where}: missing key \"{missing}\" (a {kind} group needs "
                f"{', '.join(required)}); allowed: {key_description(schema, group, missing)}")
    if error.validator == "additionalProperties":
        instance = error.instance if isinstance(error.instance, dict) else {}
        if group is None and not rest:
            known = list(schema["properties"])
            kind_text = "a sweep spec"
        else:
            kind, known, _ = group_keys(schema, group)
            kind_text = f"a {kind} group"
        extra = [k for k in instance if k not in known]
        key = extra[0] if extra else "?"
        return (f"{where}: unknown key \"{key}\"; allowed keys for {kind_text}: "
                f"{', '.join(known)}")
    if not rest:  # the group itself, or the whole spec
        if group is None and where == "top level" and path == []:
            return f"top level: {error.message}; allowed: {first_sentence(schema['description'])}"
        return (f"{where}: {short_json(error.instance)} is not allowed; allowed: "
                f"{schema['$defs']['group']['description'] if group is not None or path else ''}")
    key = str(rest[0])
    value = (group if group is not None else spec).get(key) if isinstance(
        group if group is not None else spec, dict) else error.instance
    if key == "runs" and group is None:
        if len(rest) >= 2 and isinstance(rest[1], int):
            return (f"runs[{rest[1]}]: {short_json(error.instance)} is not allowed; allowed: "
                    f"{schema['$defs']['group']['description']}")
        return f"{where}: key \"runs\": {short_json(value)} is not allowed; allowed: " \
               f"{key_description(schema, None, 'runs')}"
    item = ""
    if len(rest) >= 2 and isinstance(rest[1], int):
        item = f" (item {rest[1]}: {short_json(error.instance)})"
    return (f"{where}: key \"{key}\": {short_json(value)}{item} is not allowed; allowed: "
            f"{key_description(schema, group, key)}")


# The longest a point may run: a week, as the schema bounds a spec's "timeout" (a larger one
# overflows the clock arithmetic of the process that waits for it).
MAX_TIMEOUT_S = 604800


def first_sentence(text: str) -> str:
    """text up to its first full stop that ends a sentence (the dot of 'sweep.py' does not)."""
    return re.split(r"\.(?:\s|$)", text, maxsplit=1)[0]


# Spec keys whose values are free text for people, where a tab or a line break is fine.
FREE_TEXT_KEYS = ("description",)


def text_problem(spec: Any) -> str | None:
    """The first string of the spec (a key or a value) that holds a lone UTF-16 surrogate, or a
    control character outside a description, as one line naming the group and the key: such a
    string cannot become an argument of ppbench (NUL ends it), a progress line (ESC acts on the
    terminal) or a line of the CSV (a surrogate is not UTF-8)."""
    for where, text in script_cli.json_strings(spec):
        key = next((k for k in reversed(where) if isinstance(k, str)), None)
        free = key in FREE_TEXT_KEYS and where[-1] == key and text is not key
        bad = script_cli.control_character(text, line_breaks=free)
        if bad is None:
            continue
        kind = ("a lone UTF-16 surrogate" if script_cli.is_surrogate(bad)
                else "a control character")
        place = "top level"
        if len(where) >= 2 and where[0] == "runs" and isinstance(where[1], int):
            place = group_text(where[1], spec["runs"][where[1]])
        named = "" if key is None else f"key \"{shown(key, 60)}\": "
        item = f" (item {where[-1]})" if where and isinstance(where[-1], int) and \
            len(where) > 2 else ""
        return (f"{place}: {named}{short_json(text)}{item} holds {kind} ({shown(bad)}); "
                f"allowed: text without control characters (a description may hold tabs and "
                f"line breaks) and without lone surrogates")
    return None


def positive_finite(value: Any, what: str) -> float:
    """value as seconds: a positive, finite number up to MAX_TIMEOUT_S, else SpecError."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{what} must be a positive number of seconds, got {value!r}") from None
    if not math.isfinite(number) or number <= 0 or number > MAX_TIMEOUT_S:
        raise SpecError(f"{what} must be a positive, finite number of seconds up to "
                        f"{MAX_TIMEOUT_S} (a week), got {value!r}")
    return number


# --- a subset of a spec (--only) -------------------------------------------------------------

# The keys --only can select on: a point's own values, so that a subset's records are the same
# records a whole sweep makes (and a later whole sweep skips them).
ONLY_KEYS = ("schedule", "devices", "microbatches", "chunks", "workload", "dtype",
             "microbatch_size", "backend")
ONLY_INT_KEYS = ("devices", "microbatches", "chunks", "microbatch_size")


def parse_only(texts: list[str]) -> dict[str, set]:
    """--only KEY=V1,V2,... (each may be given again: a point must match every one); SpecError
    naming the bad text. Values of a whole-number key must be whole numbers."""
    wanted: dict[str, set] = {}
    given: dict[str, str] = {}  # the --only texts of each key so far, for the message
    for text in texts:
        key, sep, values = text.partition("=")
        if not sep or not values:
            raise SpecError(f"--only '{text}': expected KEY=V1,V2,... (keys: "
                            f"{', '.join(ONLY_KEYS)})")
        if key not in ONLY_KEYS:
            raise SpecError(f"--only '{text}': unknown key '{key}' (keys: {', '.join(ONLY_KEYS)})")
        parsed = set()
        for v in values.split(","):
            if key in ONLY_INT_KEYS:
                # Plain digits only: int() also reads '0_2', ' 2', '+2' and other scripts' digits.
                if not re.fullmatch(r"[0-9]+", v):
                    raise SpecError(f"--only '{shown(text, 80)}': '{shown(v, 40)}' is not a "
                                    f"whole number; allowed: the digits 0-9 only")
                try:
                    parsed.add(whole_number(v))
                except ValueError as e:
                    raise SpecError(f"--only {key}=...: {e}") from None
            elif v:
                parsed.add(v)
            else:
                raise SpecError(f"--only '{text}': an empty value")
        if key in wanted and not wanted[key] & parsed:
            # Each --only must hold: selections of one key that share no value select nothing,
            # and the empty set left would be named as "devices=" (see only_text).
            raise SpecError(f"--only '{given[key]}' and --only '{text}' share no value of "
                            f"{key}; allowed: selections of one key that have a value in common")
        given[key] = text if key not in given else f"{given[key]}' and --only '{text}"
        wanted[key] = wanted[key] & parsed if key in wanted else parsed
    return wanted


def select_points(points: list[Point], wanted: dict[str, set], where: str) -> list[Point]:
    """The points whose every selected key takes one of the wanted values, in the spec's order.
    A wanted value that no point of the spec has is a SpecError naming it and the values the
    spec has (a typo would otherwise select nothing, silently)."""
    for key, values in wanted.items():
        have = {point_value(p, key) for p in points}
        missing = sorted(values - have)
        if missing:
            listed = ", ".join(str(v) for v in sorted(have - {None})) or "none"
            raise SpecError(f"--only {key}={','.join(map(str, missing))}: no point of {where} "
                            f"has it ({key} there: {listed})")
    kept = [p for p in points if matches(p, wanted)]
    if not kept:
        raise SpecError(f"--only selects no point of {where} (every key must match: "
                        f"{only_text(wanted)})")
    return kept


def point_value(point: Point, key: str):
    """A point's value of an --only key; a run point without a backend runs on the cpu."""
    value = getattr(point, key)
    return "cpu" if key == "backend" and value is None and point.is_run else value


def matches(point: Point, wanted: dict[str, set]) -> bool:
    return all(point_value(point, k) in values for k, values in wanted.items())


def only_text(wanted: dict[str, set]) -> str:
    """The selection as --only's own words: devices=1,2 microbatches=4."""
    return " ".join(f"{k}={','.join(str(v) for v in sorted(vs))}" for k, vs in wanted.items())
