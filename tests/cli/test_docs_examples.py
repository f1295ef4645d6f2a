#!/usr/bin/env python3
"""The commands that README.md, docs/*.md and each command's --help show, run as a reader would.

Every fenced block is read for its commands: the lines that start (after an optional `$ `) with
`ppbench`, `build/ppbench` or `sed` (a reader's edit between two of them), a trailing backslash
joining a line to the next. Under a `$ ` command, the lines up to the next `$ ` are what it
prints (none shown: not checked); `...` stands for lines left out. Each command must exit 2 where
what it prints shows `ppbench: error:`, else 0, and print exactly the lines shown. A file's
commands run in order in one temporary folder, `ppbench` and `build/ppbench` both naming the
binary under test, so that an example that reads what an earlier one wrote (mine.csv, cpu.json)
runs as it does for a reader; the project's committed inputs an example names (INPUTS) are
linked into it. Commands that need what CI does not have (a GPU, a placeholder `...`) are left
out. The examples at the foot of each command's --help run the same way, after the files they
name as the reader's own (MY_FILES) are made: a schedule by `show`, a device profile copied from
the committed H100 one.

Run with pytest (PPBENCH=build/ppbench by default) or as a script: test_docs_examples.py PPBENCH."""
import os
import re
import subprocess
import sys
import tempfile
import unittest
from dataclasses import dataclass
from pathlib import Path

PPBENCH = os.environ.get("PPBENCH") or (
    sys.argv[1] if __name__ == "__main__" and len(sys.argv) > 1 else "build/ppbench")
ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ("ppbench", "build/ppbench", "sed")
INPUTS = ("results/reference",)  # read by examples, never written
MY_FILES = {  # how the test makes a file a --help example names as the reader's own
    "my_schedule.txt": "ppbench show -s 1f1b -d 4 -n 8 > my_schedule.txt",
    "my_gpu.json": "cp results/reference/h100_sxm_profile.json my_gpu.json",
}
NEEDS_MORE = ("--backend cuda", "--gpus", "...")  # a GPU, or a placeholder to fill in
FENCE = re.compile(r"^```[\w-]*\n(.*?)^```", re.M | re.S)


@dataclass
class Example:
    line: int  # where the command starts in its file (1-based)
    command: str
    shown: list[str] | None = None  # what it prints; None where the text shows none


def joined(lines: list[str], i: int) -> tuple[str, int]:
    """The command starting at lines[i] with its backslash continuations, and the next index."""
    text = lines[i].rstrip()
    while text.endswith("\\") and i + 1 < len(lines):
        i += 1
        text = text[:-1].rstrip() + " " + lines[i].strip()
    return text, i + 1


def examples(path: Path) -> list[Example]:
    text = path.read_text(encoding="utf-8")
    found = []
    for fence in FENCE.finditer(text):
        first = text.count("\n", 0, fence.start(1)) + 1
        lines = fence.group(1).rstrip("\n").split("\n")
        console = any(ln.startswith("$ ") for ln in lines)
        i = 0
        while i < len(lines):
            start = i
            command, i = joined(lines, i)
            if console and not command.startswith("$ "):
                continue  # output of a command left out, or prose
            command = command.removeprefix("$ ").strip()
            shown = None
            if console:
                shown = []
                while i < len(lines) and not lines[i].startswith("$ "):
                    shown.append(lines[i].rstrip())
                    i += 1
                shown = shown or None
            if command.split(" ", 1)[0] in PROGRAMS and not any(s in command for s in NEEDS_MORE):
                found.append(Example(first + start, command, shown))
    return found


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether `printed` is `shown` line for line, each `...` standing for any lines."""
    if not shown:
        return not printed
    if shown[0] == "...":
        return any(matches(shown[1:], printed[k:]) for k in range(len(printed) + 1))
    return bool(printed) and printed[0] == shown[0] and matches(shown[1:], printed[1:])


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def help_examples(binary: str) -> dict[str, list[str]]:
    """Each subcommand's --help examples: the `ppbench ...` lines from its "Example" line on."""
    top = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60).stdout
    listed = top.split("Subcommands:", 1)[1].split("\n\n", 1)[0]
    found = {}
    for name in (line.split()[0] for line in listed.splitlines() if line.strip()):
        text = subprocess.run([binary, name, "--help"], capture_output=True, text=True,
                              timeout=60).stdout
        foot = text[text.find("\nExample"):] if "\nExample" in text else ""
        lines = (line.strip().removeprefix("Example:").strip() for line in foot.splitlines())
        found[name] = [line for line in lines if line.startswith("ppbench ")]
    return found


def workspace(folder: Path) -> dict[str, str]:
    """Make `folder` a reader's working directory: build/ppbench and `ppbench` on PATH name the
    binary under test, INPUTS are linked in; returns the environment to run commands with."""
    (folder / "build").mkdir()
    (folder / "build" / "ppbench").symlink_to(Path(PPBENCH).resolve())
    for name in INPUTS:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).symlink_to(ROOT / name)
    return {**os.environ, "PATH": f"{folder / 'build'}{os.pathsep}{os.environ['PATH']}"}


def shell(command: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


class DocsExamples(unittest.TestCase):
    def test_the_examples_are_found(self):
        # The reader-facing examples this test exists for: if the parsing stops finding them,
        # the test below would pass by running nothing.
        readme = examples(ROOT / "README.md")
        self.assertGreaterEqual(len(readme), 15)
        self.assertTrue(any(e.shown and e.command.startswith("build/ppbench show -s 1f1b")
                            for e in readme))
        self.assertTrue(any(e.shown and "ppbench: error:" in "\n".join(e.shown)
                            for e in examples(ROOT / "docs" / "schedules.md")))

    def test_the_matcher_holds_lines_in_order_and_elides_at_dots(self):
        self.assertTrue(matches(["a", "...", "c"], ["a", "b", "b", "c"]))
        self.assertTrue(matches(["...", "b", "..."], ["a", "b", "c"]))
        self.assertFalse(matches(["a", "c"], ["a", "b", "c"]))
        self.assertFalse(matches(["a", "..."], ["b", "a"]))
        self.assertFalse(matches(["a"], ["a", "b"]))

    def test_every_example_runs_as_shown(self):
        for doc in documents():
            found = examples(doc)
            if not found:
                continue
            with tempfile.TemporaryDirectory() as folder:
                work = Path(folder)
                env = workspace(work)
                for e in found:
                    where = f"{doc.relative_to(ROOT)}:{e.line}: {e.command}"
                    with self.subTest(example=where):
                        r = shell(e.command, work, env)
                        refused = e.shown is not None and any(
                            line.startswith("ppbench: error:") for line in e.shown)
                        self.assertEqual(r.returncode, 2 if refused else 0,
                                         f"{where}\n{r.stderr}")
                        if e.shown is not None:
                            output = (r.stdout + r.stderr).rstrip("\n")
                            printed = [line.rstrip() for line in output.splitlines()]
                            self.assertTrue(matches(e.shown, printed),
                                            f"{where} printed:\n" + "\n".join(printed))

    def test_every_help_example_runs(self):
        found = help_examples(PPBENCH)
        # A subcommand whose help lost its examples, or a parse that finds none, fails here.
        self.assertEqual([name for name, lines in found.items() if not lines], ["list"])
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            env = workspace(work)
            for name, lines in found.items():
                for command in lines:
                    with self.subTest(example=f"ppbench {name} --help: {command}"):
                        for mine, make in MY_FILES.items():
                            if mine in command.split() and not (work / mine).exists():
                                made = shell(make, work, env)
                                self.assertEqual(made.returncode, 0, made.stderr)
                        r = shell(command, work, env)
                        self.assertEqual(r.returncode, 0, f"{command}\n{r.stderr}")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
