"""The report as one self-contained HTML page: a converter for the Markdown subset that
scripts/report.py writes (headings, tables, paragraphs, lists, fenced code, inline code, bold,
italics, links, images, HTML comments), with every image embedded as a data: URI.

The page loads nothing: no network, no external CSS or script, so it can be mailed or opened
offline. A figure the report links to but that is not on disk is named in the text, never
linked. Written for the report's own output, not for Markdown in general (no nested block
quotes, no reference-style links, one level of list nesting).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from report_papers import slug

MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml",
        ".gif": "image/gif"}

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 80rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.45rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
tr:nth-child(even) td { background: #fafafa; }
code { background: #f3f3f3; padding: 0 0.2rem; border-radius: 3px; font-size: 0.9em; }
pre { background: #f3f3f3; padding: 0.6rem; overflow-x: auto; }
figure { margin: 1rem 0; }
img { max-width: 100%; height: auto; }
.missing { color: #a00; }
"""

IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`]+)`")
BOLD = re.compile(r"\*\*(.+?)\*\*")
ITALIC = re.compile(r"(?<![\w*])\*(?!\s)([^*]+?)(?<!\s)\*(?![\w*])")
RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def data_uri(src: str, base: Path) -> str | None:
    """The image at base/src as a data: URI, or None where it is not a local image file."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", src, re.IGNORECASE):
        return None  # a URL: never fetched, never linked
    path = base / src
    mime = MIME.get(path.suffix.lower())
    if mime is None or not path.is_file():
        return None
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def image(alt: str, src: str, base: Path) -> str:
    uri = data_uri(src, base)
    if uri is None:
        return (f'<span class="missing">[figure not found: {html.escape(src)}]</span>')
    return f'<img src="{uri}" alt="{html.escape(alt, quote=True)}">'


def inline(text: str, base: Path) -> str:
    """Inline Markdown to HTML: code spans first (taken literally), then the rest escaped."""
    parts = CODE.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{html.escape(part.replace(chr(92) + '|', '|'))}</code>")
            continue
        images: list[str] = []

        def keep_image(m: re.Match) -> str:
            images.append(image(m.group(1), m.group(2), base))
            return f"\x00{len(images) - 1}\x00"

        part = IMAGE.sub(keep_image, part)
        part = html.escape(part.replace("\\|", "|"), quote=False)
        part = LINK.sub(lambda m: link(m.group(1), m.group(2)), part)
        part = BOLD.sub(r"<strong>\1</strong>", part)
        part = ITALIC.sub(r"<em>\1</em>", part)
        part = re.sub("\x00(\\d+)\x00", lambda m: images[int(m.group(1))], part)
        out.append(part)
    return "".join(out)


def link(text: str, href: str) -> str:
    # Only anchors within the page and relative paths: the page must load nothing from outside.
    if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.IGNORECASE) and not href.startswith("mailto:"):
        return f"{text} ({html.escape(href)})"
    return f'<a href="{html.escape(href, quote=True)}">{text}</a>'


def split_row(line: str) -> list[str]:
    """The cells of a table row; `\\|` is a pipe inside a cell."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def table(lines: list[str], base: Path) -> list[str]:
    head = split_row(lines[0])
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{inline(c, base)}</th>" for c in head)
           + "</tr></thead>", "<tbody>"]
    for line in lines[2:]:
        out.append("<tr>" + "".join(f"<td>{inline(c, base)}</td>" for c in split_row(line))
                   + "</tr>")
    return out + ["</tbody>", "</table>"]


def bullet_list(lines: list[str], base: Path) -> list[str]:
    out = ["<ul>"]
    nested = False
    for line in lines:
        indent = len(line) - len(line.lstrip())
        item = line.strip()[2:]
        if indent and not nested:
            out[-1] = out[-1].removesuffix("</li>") + "<ul>"
            nested = True
        elif not indent and nested:
            out.append("</ul></li>")
            nested = False
        out.append(f"<li>{inline(item, base)}</li>")
    if nested:
        out.append("</ul></li>")
    return out + ["</ul>"]


def blocks(md: str, base: Path) -> list[str]:
    lines = md.splitlines()
    out: list[str] = []
    used: set[str] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
        elif stripped.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:j])) + "</code></pre>")
            i = j + 1
        elif stripped.startswith("<!--"):
            j = i
            while j < len(lines) and "-->" not in lines[j]:
                j += 1
            out.append("\n".join(lines[i:j + 1]))
            i = j + 1
        elif m := re.match(r"^(#{1,6})\s+(.*)$", stripped):
            level, text = len(m.group(1)), m.group(2).strip()
            anchor = slug(text)
            k, unique = 1, anchor
            while unique in used:  # as GitHub numbers repeated headings
                unique, k = f"{anchor}-{k}", k + 1
            used.add(unique)
            out.append(f'<h{level} id="{unique}">{inline(text, base)}</h{level}>')
            i += 1
        elif stripped.startswith("|") and i + 1 < len(lines) and RULE.match(lines[i + 1].strip()):
            j = i + 2
            while j < len(lines) and lines[j].strip().startswith("|"):
                j += 1
            out += table(lines[i:j], base)
            i = j
        elif re.match(r"^- ", stripped):
            j = i
            while j < len(lines) and re.match(r"^\s*- ", lines[j]):
                j += 1
            out += bullet_list(lines[i:j], base)
            i = j
        elif IMAGE.fullmatch(stripped):
            m = IMAGE.fullmatch(stripped)
            assert m is not None
            out.append(f"<figure>{image(m.group(1), m.group(2), base)}</figure>")
            i += 1
        else:
            j = i
            while j < len(lines) and lines[j].strip() and not re.match(
                    r"^(#{1,6}\s|\||- |```|<!--)", lines[j].strip()):
                j += 1
            j = max(j, i + 1)
            out.append("<p>" + inline(" ".join(s.strip() for s in lines[i:j]), base) + "</p>")
            i = j
    return out


def markdown_to_html(md: str, base: Path, title: str) -> str:
    """The whole page; images are read relative to `base` (the Markdown file's folder)."""
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      f"<title>{html.escape(title)}</title>", f"<style>{STYLE}</style>",
                      "</head>", "<body>"] + blocks(md, base) + ["</body>", "</html>", ""])
