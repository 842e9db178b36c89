"""The one sentence splitter: passages into sentences (the extractive composer), answers
into cited sentences (the checks), long texts cut at sentence ends (Slack rendering).

A sentence ends at . ! ? or … with the closing quotes and brackets after it, its [N]
markers and a full stop after those (`later." [2].`), when white space and no lower-case
letter follow, or the text ends; and at every line break. So "1.4 billion" and "e.g. the
bay" do not end a sentence, and neither does a full stop inside "quay-2.example.com".

Passages of plain-text manuals are hard-wrapped: a sentence runs over several lines
(haproxy's guides wrap at 80 columns). With `wrapped=True` (the extractive composer) a
line break inside such prose is no end: see `_continues`. The checks and Slack rendering
cut at every line break, as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

SENTENCE_END = re.compile(
    r"[.!?\u2026][\"'\u201d\u2019)\]]*(?:\s*\[\d+\])*[.!?]?(?=\s+(?![a-z])|\s*$)"
    r"|\n\s*\n|\n"
)


def ends(text: str) -> Iterator[re.Match[str]]:
    """The sentence ends of a text, in order (the matches' spans)."""
    return SENTENCE_END.finditer(text)


# A wrapped line: at least this long. Hard-wrapped prose fills its lines to 70-80
# columns; list items, table rows and code lines that end short are kept apart.
WRAPPED_LINE_MIN = 50
_LIST_START = re.compile(r"\s*(?:[-*+•]\s|\d+[.)]\s|\||$)")


def _continues(text: str, newline: int) -> bool:
    """Whether the line break at `newline` sits inside wrapped prose: the line before is
    long and ends in no colon, semicolon or brace, and the line after is indented no deeper and starts no list
    item, table row or blank line."""
    line_start = text.rfind("\n", 0, newline) + 1
    line = text[line_start:newline]
    if len(line) < WRAPPED_LINE_MIN or line.rstrip().endswith((":", ";", "{", "}")):
        return False
    nxt_end = text.find("\n", newline + 1)
    nxt = text[newline + 1 : nxt_end if nxt_end >= 0 else len(text)]
    indent = len(line) - len(line.lstrip())
    return not _LIST_START.match(nxt) and len(nxt) - len(nxt.lstrip()) <= indent


def sentence_spans(text: str, wrapped: bool = False) -> list[tuple[int, int]]:
    """The (start, end) offsets of each sentence of a text, white space stripped, in order;
    blank pieces left out. text[start:end] is the sentence. With `wrapped`, a line break
    inside hard-wrapped prose does not end a sentence."""
    out: list[tuple[int, int]] = []
    start = 0
    for m in ends(text):
        if wrapped and m.group(0) == "\n" and _continues(text, m.start()):
            continue
        _add(text, start, m.end(), out)
        start = m.end()
    _add(text, start, len(text), out)
    return out


def _add(text: str, a: int, b: int, out: list[tuple[int, int]]) -> None:
    piece = text[a:b]
    stripped = piece.strip()
    if stripped:
        a += len(piece) - len(piece.lstrip())
        out.append((a, a + len(stripped)))


def split_sentences(text: str) -> list[str]:
    """The sentences of a text, stripped, in order; blank pieces left out."""
    return [text[a:b] for a, b in sentence_spans(text)]
