"""Reading and writing ppbench's result files, shared by the sweep, plot and report scripts.

Records are JSON Lines; every file is written atomically (a sibling temp file renamed over the
target), so a reader never sees half a file, even if the writer is killed.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path


def load_rows(path: Path) -> list[dict]:
    """The JSON objects of a JSON Lines file; a line that is not JSON is skipped with a warning."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            print(f"warning: {path}:{n}: not JSON, skipped", file=sys.stderr)
    return rows


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
