"""Markdown and plain text into sections of paragraphs kept byte for byte as the source has them.

Markdown: ATX and setext headings, fenced code kept whole, the `url:` of a front matter
block. Plain text is read as setext-only Markdown (load_markdown with atx=False).
"""

from __future__ import annotations

import re
from pathlib import Path

from ingest.document import LoadedDocument
from ingest.loaders.common import Outline

# The opening of an ATX heading; its title is the rest of the line with the closing #s and
# blanks stripped by str methods (a lazy `(.*?)[ \t#]*$` rescanned every run of blanks
# and #s at each position: a 100 KB heading line took 39 s).
_ATX_OPEN = re.compile(r" {0,3}(#{1,6})[ \t]")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```+|~~~+)")
_FRONT_MATTER = "---"


def load_markdown(text: str, source: str, *, atx: bool = True, fmt: str = "markdown") -> LoadedDocument:
    """Markdown (ATX and setext headings, fenced code kept whole) or setext-only text."""
    lines = text.split("\n")
    url = None
    if atx and lines and lines[0].strip() == _FRONT_MATTER:
        for i in range(1, len(lines)):
            if lines[i].strip() == _FRONT_MATTER:
                url = front_matter_url(lines[1:i])
                lines = lines[i + 1 :]
                break
    outline = Outline()
    para: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if para:
            outline.paragraph("\n".join(para))
            para.clear()

    for i, line in enumerate(lines):
        if fence is not None:
            para.append(line)
            if line.strip().startswith(fence):
                fence = None
                flush()
            continue
        m = _FENCE.match(line) if atx else None
        if m:
            flush()
            fence = m.group(1)[:3]
            para.append(line)
            continue
        h = _ATX_OPEN.match(line) if atx else None
        if h:
            flush()
            outline.heading(len(h.group(1)), line[h.end() :].strip(" \t").rstrip(" \t#"))
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not para and _SETEXT.match(nxt) and not _SETEXT.match(line):
            # A one-line paragraph underlined with === or --- is a heading.
            outline.heading(1 if nxt.strip().startswith("=") else 2, line.strip())
            continue
        if _SETEXT.match(line) and not para and i > 0 and lines[i - 1].strip():
            continue  # the underline of the heading just taken
        if not line.strip():
            flush()
        else:
            para.append(line)
    flush()
    title = outline.first_heading() or Path(source).stem
    return LoadedDocument(source, title, fmt, outline.result(), url=url)


# The key only: the value is the rest of the line, stripped by str methods (a lazy value
# before `[ \t]*$` was quadratic in a run of blanks inside it).
_URL_KEY = re.compile(r"url[ \t]*:")
# The blank before a YAML comment: two fixed characters, so a search is linear.
_COMMENT_START = re.compile(r"[ \t]#")


def front_matter_url(lines: list[str]) -> str | None:
    """The `url:` of a front matter block (YAML's plain or quoted scalar on one line), as written."""
    for line in lines:
        m = _URL_KEY.match(line)
        if not m:
            continue
        value = line[m.end() :].strip(" \t")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            return value[1:-1]
        comment = _COMMENT_START.search(value)  # a YAML comment after the value
        return value[: comment.start()].rstrip(" \t") if comment else value
    return None
