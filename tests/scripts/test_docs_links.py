"""Every relative link in the committed markdown (README, docs/, results/, benchmarks/) names a
file that exists, and a `#fragment` names a heading of that file, by the slugs GitHub gives
headings (lower case, punctuation other than `-` and `_` dropped, spaces to `-`, a repeated
heading numbered -1, -2, ...). Code blocks and code spans are not read for links."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import ROOT
from report_papers import slug  # the report's own anchors follow the same rule

FENCED = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    return re.sub(r"`[^`\n]*`", "", FENCED.sub("", text))


def anchors(text: str) -> set[str]:
    found, seen = set(), {}
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", FENCED.sub("", text), re.M):
        s = slug(m.group(1))
        found.add(f"{s}-{seen[s]}" if s in seen else s)
        seen[s] = seen.get(s, 0) + 1
    return found | set(re.findall(r'<a (?:name|id)="([^"]+)"', text))


def broken_links(files: list[Path]) -> list[str]:
    broken = []
    for doc in files:
        for url in LINK.findall(prose(doc.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", url):
                continue  # http:, https:, mailto:
            path, _, fragment = url.partition("#")
            target = (doc.parent / path) if path else doc
            if not target.exists():
                broken.append(f"{doc}: {url}: no such file")
            elif fragment and target.suffix == ".md" and \
                    fragment not in anchors(target.read_text(encoding="utf-8")):
                broken.append(f"{doc}: {url}: no such heading")
    return broken


def committed_markdown() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    return [ROOT / name for name in names]


def test_the_committed_markdown_has_no_broken_link():
    files = committed_markdown()
    assert ROOT / "README.md" in files and len(files) >= 10
    assert broken_links(files) == []


def test_a_missing_file_and_a_missing_heading_are_found(tmp_path: Path):
    (tmp_path / "other.md").write_text("# Reading a bf16 failure\n\n## Setup\n\n## Setup\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](other.md#reading-a-bf16-failure) [twice](other.md#setup-1) "
                   "[web](https://example.org/x.md) `[code](nowhere.md)`\n"
                   "[gone](nowhere.md) [no heading](other.md#setup-2) [self](#top)\n"
                   "```\n[fenced](nowhere.md)\n```\n")
    assert broken_links([doc]) == [f"{doc}: nowhere.md: no such file",
                                   f"{doc}: other.md#setup-2: no such heading",
                                   f"{doc}: #top: no such heading"]
