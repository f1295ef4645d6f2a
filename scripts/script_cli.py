"""The command-line contract every script shares with ppbench.

Bad input (an option, a file named on the command line, a record or table of the wrong shape)
is one line on stderr that names it, and exit 2; a machine or environment problem (a Python
module that is not installed, a program that cannot run, a full disk) is one line and exit 3;
never a traceback. PPBENCH_TRACEBACK=1 shows the traceback behind such a line, for whoever is
changing a script.

A script builds its parser with OneLineParser, reads its inputs with read_text / read_json (or
inside `shaped(...)` where it walks a record whose shape it cannot check up front), checks
where it will write with output_path before it starts its work, and runs its main through run().
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import signal
import stat
import sys
import tempfile
import threading
import unicodedata
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

EXIT_INVALID, EXIT_MACHINE = 2, 3


class ScriptError(Exception):
    """A failure a script reports in one line; .code is the exit status to leave with."""

    code = 1

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code


class InputError(ScriptError):
    """The caller's input is wrong: an option, a file, a record (exit 2)."""

    code = EXIT_INVALID


class MachineError(ScriptError):
    """The machine or environment cannot do it: a missing module, an unwritable disk (exit 3)."""

    code = EXIT_MACHINE


def tracebacks_wanted() -> bool:
    return os.environ.get("PPBENCH_TRACEBACK", "") not in ("", "0")


def say(name: str, message: str) -> None:
    """One line on stderr, prefixed by the script's name; a message's own line breaks are
    folded so that the contract's one line holds, and what a terminal would act on (ESC, a
    lone surrogate) is escaped (see shown)."""
    print(shown(f"{name}: {' '.join(str(message).split())}"), file=sys.stderr)


# What shown escapes: control characters (ESC, NUL, DEL, C1), format characters (bidi
# overrides), line and paragraph separators, and lone UTF-16 surrogates (which no UTF-8 stream
# can write).
UNSHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def shown(text: str, limit: int | None = None) -> str:
    """text as one harmless line: each character of UNSHOWN_CATEGORIES escaped as Python writes
    it (\\x1b, \\ud800); with limit, cut to that many characters and an ellipsis."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:max(limit - 1, 0)] + "…"
    if text.isprintable():  # the common case, at C speed (a space is printable, \t is not)
        return text
    return "".join(ch.encode("unicode_escape").decode("ascii")
                   if unicodedata.category(ch) in UNSHOWN_CATEGORIES else ch for ch in text)


def control_character(text: str, line_breaks: bool = False) -> str | None:
    """The first lone UTF-16 surrogate or control character (Unicode category Cc: NUL, ESC, DEL,
    ...) of text, or None: such text cannot be an argument (NUL ends it), a line of output (ESC
    acts on the terminal) or UTF-8 (a surrogate). With line_breaks, tab and newline are allowed
    (free text). Name it with shown(); is_surrogate tells the two kinds apart."""
    for ch in text:
        if ch.isprintable():
            continue
        if is_surrogate(ch) or (unicodedata.category(ch) == "Cc" and
                                not (line_breaks and ch in "\t\n")):
            return ch
    return None


def is_surrogate(ch: str) -> bool:
    """Whether ch is a lone UTF-16 surrogate (JSON's "\\ud800"), which UTF-8 cannot encode."""
    return "\ud800" <= ch <= "\udfff"


def surrogate(text: str) -> str | None:
    """The first lone UTF-16 surrogate of text, or None."""
    return next((ch for ch in text if is_surrogate(ch)), None)


def json_strings(value: Any, where: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """Every string of a parsed JSON value, keys included, with where it is: the path of keys
    and indexes to it (a key's own path ends in the key)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield (*where, key), key
            yield from json_strings(item, (*where, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from json_strings(item, (*where, i))


def first_line(text: str, default: str = "no message") -> str:
    """The first non-blank line of a program's output, stripped: a ppbench refusal is one line,
    and a tool's version banner starts with its name."""
    return next((line.strip() for line in text.splitlines() if line.strip()), default)


def last_line(text: str, default: str = "no message") -> str:
    """The last non-blank line, stripped: where a program that logs as it goes (mpirun, a
    Python traceback) says why it stopped."""
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), default)


class StopSignal(BaseException):
    """SIGTERM or SIGHUP (`timeout`, a batch system, a closed terminal), raised where the script
    is so that its `finally` blocks still run: a temporary file is removed, emulated nodes are
    taken down. Python's default for these signals ends the process on the spot."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_signals_raise() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise StopSignal where nothing else has claimed them
    (only the main thread may set a handler; elsewhere this does nothing)."""
    def stop(signum: int, _frame: Any) -> None:
        raise StopSignal(signum)

    claimed = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, stop)
                claimed.append(sig)
    try:
        yield
    finally:
        for sig in claimed:
            signal.signal(sig, signal.SIG_DFL)


def run(name: str, main: Callable[[Sequence[str] | None], int | None],
        argv: Sequence[str] | None = None) -> int:
    """main(argv)'s exit status, with the contract's failures turned into one line each.

    ScriptError carries its own status; an OSError that no reader turned into an InputError is
    the machine's (exit 3); Ctrl-C is 130, SIGTERM 143 and SIGHUP 129, each after the script's
    `finally` blocks ran. Anything else is a bug in the script and keeps its traceback.
    """
    try:
        with stop_signals_raise():
            try:
                code = int(main(argv) or 0)
            except SystemExit as e:  # argparse's --help (0) and its errors (2)
                if e.code is not None and not isinstance(e.code, int):
                    raise
                code = e.code or 0
            # What is still buffered goes now, where a full disk can still be said in one line
            # (at the interpreter's exit it would be a warning and exit 120).
            if sys.stdout is not None:
                sys.stdout.flush()
            return code
    except StopSignal as e:
        say(name, f"stopped by {signal.Signals(e.signum).name}")
        return 128 + e.signum
    except ScriptError as e:
        if tracebacks_wanted():
            raise
        say(name, str(e))
        return e.code
    except OSError as e:
        if tracebacks_wanted():
            raise
        say(name, f"{e.strerror or e}" + (f": {e.filename}" if e.filename else ""))
        return EXIT_MACHINE
    except KeyboardInterrupt:
        say(name, "interrupted")
        return 130


class OneLineParser(argparse.ArgumentParser):
    """argparse with ppbench's manners: a bad option is one line on stderr and exit 2 (argparse
    prints its usage block too), and the usage stays one `--help` away. An unknown option is
    named even where a required argument is missing too (argparse would name only the latter,
    and `tool --typo` would read as if the typo were not there)."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def unknown_options(self) -> list[str]:
        """The words before `--` that look like options this parser does not have."""
        unknown = []
        for word in getattr(self, "_words", []):
            if word == "--":
                break
            if not word.startswith("-") or word == "-" or \
                    self._negative_number_matcher.match(word):
                continue
            head = word.split("=", 1)[0]
            known = head in self._option_string_actions or (
                self.allow_abbrev and head.startswith("--") and
                any(o.startswith(head) for o in self._option_string_actions))
            if not known:
                unknown.append(word)
        return unknown

    def error(self, message: str) -> None:  # type: ignore[override]
        if message.startswith("the following arguments are required"):
            unknown = self.unknown_options()
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        say(self.prog, f"{message} (see --help)")
        sys.exit(EXIT_INVALID)


# --- option types ---------------------------------------------------------------------------

def number(kind: type = int, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> Callable[[str], Any]:
    """An argparse type: a finite int or float within [low, high] (low excluded if low_open);
    the error names the value and the range allowed."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{text}' is not {'a whole number' if kind is int else 'a number'}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
        if (low is not None and (value < low or (low_open and value == low))) or \
                (high is not None and value > high):
            show = (lambda v: str(int(v))) if kind is int else (lambda v: f"{v:g}")
            lo = "" if low is None else (f"> {show(low)}" if low_open else f">= {show(low)}")
            hi = "" if high is None else f"<= {show(high)}"
            raise argparse.ArgumentTypeError(
                f"{text} is out of range (allowed: {' and '.join(x for x in (lo, hi) if x)})")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def number_list(kind: type = int, low: float | None = None,
                high: float | None = None) -> Callable[[str], list]:
    """An argparse type: a comma-separated, non-empty list of number(kind, low, high)."""
    one = number(kind, low, high)

    def parse(text: str) -> list:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"'{text}' names no value")
        return [one(t) for t in items]
    parse.__name__ = "list"
    return parse


# --- inputs ---------------------------------------------------------------------------------

# The largest file read_text reads, unless the caller names its own cap: a records file of many
# thousand runs is a few MiB; far more is a wrong path, read whole into memory otherwise.
MAX_READ_BYTES = 1 << 30


def read_text(path: os.PathLike | str, what: str = "file",
              max_bytes: int = MAX_READ_BYTES) -> str:
    """A text file the caller named; a missing, unreadable or non-UTF-8 file, one that is not a
    regular file or one over max_bytes is an InputError that names it."""
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO for reading would wait for a writer (unkillably, from the
        # user's side); so opened, it is refused below with the devices (/dev/zero never ends).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path}: is a folder, not a file") from None
    except OSError as e:
        raise InputError(f"{what} {path}: cannot be read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):  # os.open opens a folder; reading it fails
            raise InputError(f"{what} {path}: is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{what} {path}: not a regular file (a FIFO, socket or device); "
                             f"allowed: a regular file")
        # Up to one byte past the cap: a file that grows while it is read is caught too.
        blocks: list[bytes] = []
        left = max_bytes + 1 if st.st_size <= max_bytes else 0
        while left > 0:
            block = os.read(fd, min(left, 1 << 26))
            if not block:
                break
            blocks.append(block)
            left -= len(block)
        data = b"".join(blocks)
    except OSError as e:
        raise InputError(f"{what} {path}: cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)
    if st.st_size > max_bytes or len(data) > max_bytes:
        cap = (f"{max_bytes >> 20} MiB" if max_bytes % (1 << 20) == 0 and max_bytes
               else f"{max_bytes} bytes")
        raise InputError(f"{what} {path}: over {cap}; allowed: at most {cap}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{what} {path}: not UTF-8 text (byte {e.start})") from None
    # Universal newlines, as text-mode reading (Path.read_text) gives them.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_json(text: str, where: str, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """json.loads, with the place named in its error (InputError). parse_constant, as json.loads
    takes it, may refuse NaN and Infinity by raising ValueError: its message is kept."""
    try:
        return json.loads(text, parse_constant=parse_constant)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: not JSON (line {e.lineno} column {e.colno}: {e.msg})") \
            from None
    except RecursionError:
        raise InputError(f"{where}: not JSON this program can read (nested too deep)") from None
    except ValueError as e:
        raise InputError(f"{where}: not JSON ({e})") from None


def read_json(path: os.PathLike | str, what: str = "file", expect: type | None = dict) -> Any:
    """A JSON file the caller named, of the top-level type `expect` (None: any)."""
    return expect_kind(parse_json(read_text(path, what), f"{what} {path}"), expect,
                       f"{what} {path}")


def expect_kind(value: Any, expect: type | None, where: str) -> Any:
    """value, where it is of the top-level JSON type `expect` (None: any); else InputError."""
    if expect is not None and not isinstance(value, expect):
        raise InputError(f"{where}: a JSON {json_kind(expect)} was expected, "
                         f"not {json_kind(type(value))}")
    return value


def json_kind(kind: type) -> str:
    return {dict: "object", list: "array", str: "string", int: "number", float: "number",
            bool: "true/false", type(None): "null"}.get(kind, kind.__name__)


SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError)


@contextlib.contextmanager
def shaped(what: str) -> Iterator[None]:
    """Where a script walks a record or table it did not write itself: a field that is missing
    or of the wrong type is the input's fault, named as such (InputError), not a traceback."""
    try:
        yield
    except SHAPE_ERRORS as e:
        if tracebacks_wanted():
            raise
        detail = f"no field {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
        raise InputError(f"{what}: not of the shape expected ({detail})") from None


def require_module(name: str, purpose: str) -> Any:
    """import_module(name), or MachineError naming what needs it and how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise MachineError(f"{purpose} needs the Python module '{name}', which is not "
                           f"installed here ({e})") from None


# --- outputs --------------------------------------------------------------------------------

def output_path(path: os.PathLike | str, what: str = "--out", folder: bool = False) -> Path:
    """Checks, before any work, that `path` can be written: a file (or, with folder, a folder)
    whose parent exists or can be made and is writable. InputError names the option."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise InputError(f"{what} {path}: exists and is not a folder")
        target_dir = path
    else:
        if path.is_dir():
            raise InputError(f"{what} {path}: is a folder; give a file name")
        target_dir = path.parent if str(path.parent) else Path(".")
    existing = target_dir
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{what} {path}: {existing} is not a folder")
    # Made and probed now, as root too (for whom os.access says yes to /proc): the folder
    # the output goes to is wanted anyway, and a probe file is the only sure test.
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=target_dir, prefix=".ppbench-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise InputError(f"{what} {path}: cannot write there ({e.strerror or e})") from None
    return path
