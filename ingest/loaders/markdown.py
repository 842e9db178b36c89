"""Markdown and plain text into sections of paragraphs kept byte for byte as the source has them.

Markdown: ATX and setext headings, fenced code kept whole, the `url:` and `title:` of a
front matter block (the title names a page without a level-1 heading of its own, as
Jekyll, Hugo, MkDocs and Docusaurus pages often have it). Plain text is read as
setext-only Markdown (load_markdown with atx=False).
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
    url = fm_title = None
    if atx and lines and lines[0].strip() == _FRONT_MATTER:
        for i in range(1, len(lines)):
            if lines[i].strip() == _FRONT_MATTER:
                url, fm_title = front_matter_url(lines[1:i]), front_matter_title(lines[1:i])
                lines = lines[i + 1 :]
                break
    outline = Outline()
    para: list[str] = []
    fence: str | None = None
    top = False  # whether the body has a level-1 heading of its own

    def heading(level: int, title: str) -> bool:
        outline.heading(level, title)
        return level == 1 and bool(title.split())

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
            top |= heading(len(h.group(1)), line[h.end() :].strip(" \t").rstrip(" \t#"))
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not para and _SETEXT.match(nxt) and not _SETEXT.match(line):
            # A one-line paragraph underlined with === or --- is a heading.
            top |= heading(1 if nxt.strip().startswith("=") else 2, line.strip())
            continue
        if _SETEXT.match(line) and not para and i > 0 and lines[i - 1].strip():
            continue  # the underline of the heading just taken
        if not line.strip():
            flush()
        else:
            para.append(line)
    flush()
    # A body's own level-1 heading names the page, else its front matter title; the title
    # does not head the passages (measured: docs/decisions/0055-front-matter-title.md).
    title = outline.first_heading() if top or not fm_title else fm_title
    return LoadedDocument(source, title or Path(source).stem, fmt, outline.result(), url=url)


# The keys only: the value is the rest of the line, stripped by str methods (a lazy value
# before `[ \t]*$` was quadratic in a run of blanks inside it).
_URL_KEY = re.compile(r"url[ \t]*:")
_TITLE_KEY = re.compile(r"title[ \t]*:")
# The blank before a YAML comment: two fixed characters, so a search is linear.
_COMMENT_START = re.compile(r"[ \t]#")
# How a value opens that is no one-line scalar: a block scalar (| >), a flow sequence or
# mapping ([ {), or nothing but a comment.
_NOT_SCALAR = "|>[{#"


def _front_matter_value(lines: list[str], key: re.Pattern[str]) -> str | None:
    """The first `key:` line's value, blanks around it stripped; None when no line has the key."""
    for line in lines:
        m = key.match(line)
        if m:
            return line[m.end() :].strip(" \t")
    return None


def front_matter_url(lines: list[str]) -> str | None:
    """The `url:` of a front matter block (YAML's plain or quoted scalar on one line), as written."""
    value = _front_matter_value(lines, _URL_KEY)
    if value is None:
        return None
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    comment = _COMMENT_START.search(value)  # a YAML comment after the value
    return value[: comment.start()].rstrip(" \t") if comment else value


def front_matter_title(lines: list[str]) -> str | None:
    """The `title:` of a front matter block: a one-line plain or quoted scalar, a comment
    after it dropped, blanks inside collapsed; None when absent, empty, or not a scalar."""
    value = _front_matter_value(lines, _TITLE_KEY)
    if not value or value[0] in _NOT_SCALAR:
        return None
    if value[0] in "\"'":
        end = value.rfind(value[0])  # the closing quote, then at most a comment
        rest = value[end + 1 :].strip(" \t")
        if end == 0 or (rest and not rest.startswith("#")):
            return None
        inner = value[1:end]
        value = inner.replace("''", "'") if value[0] == "'" else inner.replace('\\"', '"')
    else:
        comment = _COMMENT_START.search(value)
        value = value[: comment.start()] if comment else value
    return " ".join(value.split()) or None
