"""Reading and writing ppbench's result files, shared by the sweep, plot and report scripts.

Records are JSON Lines. A sweep appends one line per point through append_jsonl (one write
under an exclusive fcntl.flock, so two writers never interleave and a reader never sees half
a line); a point that is re-run is appended again, and the later line stands (latest_rows).
Every other file is written atomically (a sibling temp file renamed over the target), so a
reader never sees half a file, even if the writer is killed.

The schedule registry (`ppbench list --format json`) is read once per process by
schedule_registry(); schedule_order() gives the registry's order, or the order in the data when
no ppbench is given.

The provenance a script records of its own (beside what ppbench's records carry) is read here
once: load_average() and git_commit().
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

from script_cli import EXIT_INVALID, EXIT_MACHINE, InputError, OneLineParser, ScriptError, \
    expect_kind, first_line, json_kind, output_path, parse_json, read_text, require_module, run


class PpbenchError(ScriptError):
    """ppbench could not be used; .code is the exit code to leave with (2: no such file,
    3: it exists but cannot run, 1: it ran and failed)."""

    def __init__(self, message: str, code: int):
        super().__init__(message, code)


def load_rows(path: Path) -> list[dict]:
    """The JSON objects of a JSON Lines file; a line that is not JSON is skipped with a warning
    (a line a killed writer left half written, see append_text). A file that cannot be read, or
    is not text, is an InputError; so is a line holding NaN or an infinity, which no writer of
    ours makes (append_jsonl refuses them) and which would reach a table as "nan"."""
    rows = []
    for n, line in enumerate(read_text(path, "records").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = loads_finite(line)
        except ValueError as e:
            if parses_with_nan(line):
                raise InputError(f"records {path}:{n}: {e}") from None
            print(f"warning: {path}:{n}: not JSON, skipped", file=sys.stderr)
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            print(f"warning: {path}:{n}: not a JSON object, skipped", file=sys.stderr)
    return rows


def finite_float(text: str) -> float:
    """json.loads's parse_float that refuses a number beyond a double (1e999 would be inf)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a double (a finite number is needed)")
    return value


def reject_constant(name: str) -> Any:
    """json.loads's parse_constant that refuses NaN and Infinity (Python's, not JSON's)."""
    raise ValueError(f"{name} is not a JSON number (a finite number is needed)")


def loads_finite(text: str) -> Any:
    """json.loads of strict JSON: every number finite, so that what is read can be written
    back with allow_nan=False (append_jsonl). ValueError otherwise."""
    return json.loads(text, parse_float=finite_float, parse_constant=reject_constant)


def read_json_finite(path: os.PathLike | str, what: str = "file",
                     expect: type | None = dict) -> Any:
    """read_json of strict JSON (loads_finite): a NaN, an infinity or a number beyond a double
    (1e999) is an InputError naming `what`, the file and the value, as a syntax error is."""
    text = read_text(path, what)
    where = f"{what} {path}"
    try:
        value = loads_finite(text)
    except (RecursionError, json.JSONDecodeError):
        value = parse_json(text, where)  # raises it, worded as everywhere else
    except ValueError as e:  # finite_float's or reject_constant's
        raise InputError(f"{where}: not strict JSON ({e})") from None
    return expect_kind(value, expect, where)


def parses_with_nan(text: str) -> bool:
    """Whether text is JSON once NaN and the infinities are allowed: loads_finite refused it for
    a number, not for a torn or garbled line."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def point_key(row: dict) -> str | None:
    """The requested point of a sweep row (its "point" object, canonical JSON); None if absent."""
    point = row.get("point")
    return json.dumps(point, sort_keys=True) if isinstance(point, dict) else None


def latest_rows(rows: Iterable[dict],
                key: Callable[[dict], Any] = point_key) -> list[dict]:
    """One row per point: a later row of the same point replaces the earlier one in its place
    (a sweep appends a re-run point again). Rows without a key are all kept."""
    out: list[dict | None] = []
    where: dict[Any, int] = {}
    for row in rows:
        k = key(row)
        if k is None:
            out.append(row)
        elif k in where:
            out[where[k]] = row
        else:
            where[k] = len(out)
            out.append(row)
    return [r for r in out if r is not None]


def load_records(*paths: Path) -> list[dict]:
    """load_rows, then latest_rows: what the sweep recorded for each point, last word kept (over
    several files, in the order given: a later file's row of a point replaces an earlier one's)."""
    return latest_rows(row for path in paths for row in load_rows(path))


def file_mode(path: Path) -> int:
    """The mode of the existing file, else what a plain open() would give under the umask."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write(path: Path, text: str) -> None:
    """Write text to path so that readers see either the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, file_mode(path))  # mkstemp makes 0600; keep the usual permissions
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def figure_path(out: Path, what: str = "--out") -> Path:
    """The file a figure for `out` is written to: its format from the suffix, and a name without
    one gets ".png" (as matplotlib's savefig would); a folder, or a suffix matplotlib cannot
    write, is an InputError naming `what`, and a missing matplotlib a MachineError (exit 3), all
    found before any work rather than at the end of it."""
    out = Path(out)
    if out.is_dir():  # else "DIR" would become "DIR.png" beside it
        raise InputError(f"{what} {out}: is a folder; give a file name")
    # Asked first, whatever the suffix: a figure is drawn after the work, too late to say then.
    require_module("matplotlib", f"{what} {out}")
    from matplotlib.backend_bases import FigureCanvasBase
    if not out.suffix:
        return out.with_name(out.name + ".png")
    formats = FigureCanvasBase.get_supported_filetypes()
    if out.suffix[1:].lower() not in formats:
        raise InputError(f"{what} {out}: matplotlib cannot write a .{out.suffix[1:]} file "
                         f"(allowed: {', '.join('.' + f for f in sorted(formats))})")
    return out


def pyplot(purpose: str) -> Any:
    """matplotlib.pyplot, drawing to files only (the Agg backend): imported where a figure is
    drawn rather than at a plot script's top, so that --help and the checks of its inputs work
    without matplotlib, and its absence is one line naming `purpose` (MachineError, exit 3)."""
    require_module("matplotlib", purpose).use("Agg")
    return require_module("matplotlib.pyplot", purpose)


def atomic_savefig(fig: Any, path: Path, **savefig_args: Any) -> None:
    """fig.savefig(path), atomically as atomic_write: the figure is drawn into a sibling temp
    file in the format of path's suffix (png where it has none, as matplotlib does) and renamed
    over path, so a killed or failing draw never leaves half an image."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = path.suffix[1:].lower() or "png"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        os.chmod(tmp, file_mode(path))
        fig.savefig(tmp, format=fmt, **savefig_args)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def append_jsonl(path: Path, row: dict) -> None:
    """Append one row to a JSON Lines file: the only way a sweep adds a record.

    The line is written with a single os.write under an exclusive fcntl.flock on the file, and
    synced before the lock is released (append_text). A row holding NaN or an infinity is a
    ValueError: those are not JSON, and a reader other than Python's would reject the line.
    """
    append_text(path, json.dumps(row, separators=(",", ":"), allow_nan=False) + "\n")


def append_text(path: Path, text: str) -> None:
    """Append whole lines to a file with one os.write under an exclusive fcntl.flock, synced
    before the lock is released. Should the file not end with a newline (a writer killed in the
    middle of its write by something harsher than a signal), the text starts on a new line so
    that its lines stay whole; the broken line is then skipped by load_rows. A write that fails
    or is cut short (a full disk, a file size limit) is undone before the error is raised, so
    the file never keeps a torn line of ours."""
    _append_locked(path, lambda old: text.encode("utf-8"))


def append_new_lines(path: Path, lines: Iterable[str]) -> int:
    """Append lines (each without its newline) as append_text does, leaving out every line the
    file already holds or that came earlier in lines: records set aside twice (a sweep stopped
    between setting them aside and compacting) are not doubled. Returns the lines written."""
    written: list[str] = []

    def data(old: bytes) -> bytes:
        seen = set(old.decode("utf-8", "replace").split("\n"))
        for line in lines:
            if line not in seen:
                seen.add(line)
                written.append(line)
        return "".join(line + "\n" for line in written).encode("utf-8")

    _append_locked(path, data, read_old=True)
    return len(written)


def _append_locked(path: Path, make_data: Callable[[bytes], bytes], read_old: bool = False) -> None:
    """The one write of append_text and append_new_lines: make_data(what the file holds, when
    read_old, else b"") gives the bytes to append, under the lock; undone on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, file_mode(path))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        data = make_data(os.pread(fd, size, 0) if read_old and size else b"")
        if not data:
            return
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(f"{path}: short write ({written} of {len(data)} bytes)")
            os.fsync(fd)
        except BaseException:
            # Back to the size before this write: a torn line would be read as a damaged
            # record, and the caller, who sees the error, has not recorded it.
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)  # releases the lock


def rewrite_jsonl(path: Path, rows: Iterable[dict]) -> None:
    """Replace a JSON Lines file atomically with rows (under the same lock as append_jsonl)."""
    # allow_nan=False: a NaN written back would make the file one that loads_finite refuses.
    text = "".join(json.dumps(r, separators=(",", ":"), allow_nan=False) + "\n" for r in rows)
    if not path.exists():
        atomic_write(path, text)
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        atomic_write(path, text)
    finally:
        os.close(fd)


# --- the schedule registry ------------------------------------------------------------------

_REGISTRY: dict[str, list[dict]] = {}


def check_ppbench(ppbench: str | os.PathLike) -> None:
    """The one check of a --ppbench before it is run (docs/bench.md, "Exit codes"): a path that
    names no file (nothing there, a folder) is PpbenchError code 2; a bare name is looked up on
    PATH. A file that is there but cannot run (not executable, not a program) is left to the
    run, which says so with code 3."""
    path = str(ppbench)
    if os.path.isfile(path) or (os.sep not in path and shutil.which(path)):
        return
    why = "a folder" if os.path.isdir(path) else "no such file"
    raise PpbenchError(f"ppbench '{path}' is not a program ({why}; build it first: make)",
                       EXIT_INVALID)


def schedule_registry(ppbench: str | os.PathLike | None,
                      timeout: float = 60.0) -> list[dict] | None:
    """`ppbench list --format json`'s schedules (name, title, source, constraints, layout,
    uses_chunks, closed_form), in the registry's order; run once per ppbench and process.

    None when ppbench is None (the callers then use the order in the data). Raises PpbenchError:
    code 2 when the path names no file (check_ppbench), 3 when it cannot be run, 1 when it fails
    or prints something else than the registry.
    """
    if ppbench is None:
        return None
    path = str(ppbench)
    if path in _REGISTRY:
        return _REGISTRY[path]
    check_ppbench(path)
    try:
        proc = subprocess.run([path, "list", "--format", "json"], capture_output=True,
                              encoding="utf-8", errors="replace", timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PpbenchError(f"cannot run ppbench '{path}': {e}", 3) from e
    if proc.returncode != 0:
        message = first_line(proc.stderr, "")
        code = EXIT_MACHINE if proc.returncode == EXIT_MACHINE else 1
        raise PpbenchError(f"'{path} list --format json' exited {proc.returncode}"
                           + (f": {message}" if message else ""), code)
    try:
        schedules = json.loads(proc.stdout)["schedules"]
        if not isinstance(schedules, list) or not all(
                isinstance(s, dict) and isinstance(s.get("name"), str) for s in schedules):
            raise ValueError("no list of named schedules")
    except (ValueError, KeyError, TypeError) as e:
        raise PpbenchError(f"'{path} list --format json' printed no schedule registry: {e}",
                           1) from e
    _REGISTRY[path] = schedules
    return schedules


def schedule_order(registry: list[dict] | None, rows: Iterable[dict] = ()) -> list[str]:
    """Schedule names in the registry's order (then any the registry lacks, as the data has
    them); without a registry, in the order the data first names them."""
    names: list[str] = [s["name"] for s in registry] if registry else []
    for row in rows:
        point = row.get("point") if isinstance(row.get("point"), dict) else {}
        name = row.get("schedule", point.get("schedule"))
        if isinstance(name, str) and name not in names:
            names.append(name)
    return names


def order_key(order: list[str]) -> Callable[[str], tuple[int, str]]:
    """Sort key of a series label ("interleaved-1f1b v=2") by its schedule's place in order."""
    place = {name: i for i, name in enumerate(order)}

    def key(label: str) -> tuple[int, str]:
        name = label.split(" ")[0]
        return (place.get(name, len(place)), label)

    return key


def ppbench_text(ppbench: str, args: Iterable[str]) -> str:
    """What `ppbench ARGS` prints on stdout; PpbenchError where it names no file (check_ppbench,
    .code 2), cannot be started (3) or exits non-zero, with its message and, as .code, its exit
    status where that is the contract's 2 (bad input) or 3 (the machine), else 1."""
    args = [str(a) for a in args]
    check_ppbench(ppbench)
    try:
        done = subprocess.run([ppbench, *args], capture_output=True, encoding="utf-8",
                              errors="replace", check=False)
    except OSError as e:
        raise PpbenchError(f"cannot run ppbench '{ppbench}': {e.strerror or e}",
                           EXIT_MACHINE) from None
    if done.returncode != 0:
        code = done.returncode if done.returncode in (EXIT_INVALID, EXIT_MACHINE) else 1
        raise PpbenchError(f"ppbench {' '.join(args)}: exit {done.returncode}: "
                           f"{done.stderr.strip()}", code)
    return done.stdout


def ppbench_json(ppbench: str, args: Iterable[str]) -> dict:
    """The JSON record `ppbench ARGS` prints (ppbench_text); PpbenchError (1) where it prints
    something else."""
    args = [str(a) for a in args]
    text = ppbench_text(ppbench, args)
    try:
        return json.loads(text)
    except ValueError:
        raise PpbenchError(f"'{ppbench} {' '.join(args)}' printed no JSON record", 1) from None


NUMBER = (int, float)
_REQUIRED = object()


def record_value(record: Any, path: str, where: str, kind: type | tuple[type, ...] = NUMBER,
                 default: Any = _REQUIRED) -> Any:
    """The field at the dotted `path` ("workload.config.seq") of a record ppbench printed for
    `where` (its command), of `kind` (a number: finite, not true/false), or `default` where the
    field is absent. A record of another shape is ppbench's failure, not the caller's: a
    PpbenchError (exit 1) that names the command, the field and what it holds."""
    value, parts = record, path.split(".")
    for i, key in enumerate(parts):
        if not isinstance(value, dict):
            at = ".".join(parts[:i])
            raise PpbenchError(f"'{where}' printed a record whose {at or 'top level'} is "
                               f"{json_kind(type(value))}, not an object", 1)
        if key not in value:
            if default is not _REQUIRED:
                return default
            raise PpbenchError(f"'{where}' printed a record without {path}", 1)
        value = value[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    wrong = not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
    if wrong or isinstance(value, float) and not math.isfinite(value):
        wanted = "a finite number" if kinds == NUMBER else \
            " or ".join(f"a JSON {json_kind(k)}" for k in kinds)
        raise PpbenchError(f"'{where}' printed a record whose {path} is {value!r}, not {wanted}",
                           1)
    return value


def table_script_main(doc: str, name: str, default_out: str,
                      build: Callable[[str], dict[str, Any]],
                      errors: tuple[type[BaseException], ...],
                      argv: list[str] | None = None) -> int:
    """The command line of a script that builds one reference table from ppbench's output
    (dp_scaling.py, zb_table5.py): --ppbench and --out, the table written atomically as JSON
    and its markdown printed; one line and exit 1 where `build` raises one of `errors`, and the
    contract's one line and exit status (script_cli) for bad options, an unwritable --out or a
    ppbench that cannot be run."""
    import argparse

    def main(argv: list[str] | None) -> int:
        parser = OneLineParser(prog=name, description=doc.splitlines()[0],
                               epilog=doc.split("\n\n", 1)[1],
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--ppbench", default="build/ppbench", help="(default: %(default)s)")
        parser.add_argument("--out", type=Path, default=Path(default_out),
                            help="(default: %(default)s)")
        args = parser.parse_args(argv)
        output_path(args.out)
        try:
            table = build(args.ppbench)
        except PpbenchError:
            raise
        except errors as e:
            print(f"{name}: {e}", file=sys.stderr)
            return 1
        atomic_write(args.out, json.dumps(table, indent=1) + "\n")
        sys.stdout.write(table["markdown"])
        print(f"wrote {args.out}", file=sys.stderr)
        return 0

    return run(name, main, argv)


# ---- provenance a script records itself ----------------------------------------------------


def load_average(digits: int | None = None) -> list[float]:
    """The 1-, 5- and 15-minute load averages (os.getloadavg), each rounded to `digits` where
    given: timings taken while other work shares the cores are not comparable, so a record says
    how busy the machine was."""
    load = os.getloadavg()
    return list(load) if digits is None else [round(x, digits) for x in load]


def git_commit(root: Path) -> str:
    """HEAD of the work tree at `root` (12 hex digits), with -dirty when tracked files outside
    results/ changed (a record written there does not make the code it measured dirty);
    $PPBENCH_GIT_COMMIT, else "unknown", where git cannot tell (a copy without .git, as a lent
    machine gets)."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no", "--", ".", ":!results"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("PPBENCH_GIT_COMMIT", "unknown")
    return head + ("-dirty" if dirty else "")
