"""Cutting long text into pieces within Slack's limits, at the cleanest boundary in reach.

Slack's limits (docs.slack.dev/reference/block-kit): a section's text is at most 3,000
characters; a `markdown` block's text at most 12,000, and so are all the markdown blocks of
one message together (and one streaming call's markdown_text). A cut goes at a paragraph
break, else a sentence end, else a line break, else a space, as late as it can within the
limit but not in its first third (a boundary that early wastes too much of the piece). A
markdown cut never falls inside a quotation, a Slack link or mention (`<…>`), a markdown
link, inline code or a code fence, nor between a quotation and the flag of its failed check.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable

from bot.answer import sentences

SECTION_TEXT_MAX = 3000
MARKDOWN_MAX = 12_000

_ENTITY_TAIL = re.compile(r"&[a-z]{0,4}$")
_PARAGRAPH = re.compile(r"\n\n")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r" ")
# What a markdown cut keeps whole (the text is escaped: a raw <…> is one of ours, a link).
# No span holds its own opening mark ("[", "“"), so a run of unclosed ones is read once.
_PROTECTED = re.compile(
    r"```.*?```|`[^`\n]*`|<[^<>\n]*>|\[[^\[\]\n]*\]\([^)\s]*\)|\"[^\"]*\"|\u201c[^\u201c\u201d]*\u201d", re.DOTALL
)
# A failed check's flag: " ⚠️ [quote check failed: mis-cited: the words are in [3], not [2]]".
_FLAG = re.compile(r"(?:(?<!\s)\s+)?\u26a0\ufe0f? \[(?:[^\[\]\n]|\[\d+\])*\]")


def _last(positions: Iterable[int], limit: int, floor: int, allowed: Callable[[int], bool]) -> int | None:
    best = None
    for pos in positions:
        if pos > limit:
            break
        if pos >= floor and allowed(pos):
            best = pos
    return best


def _boundary(text: str, limit: int, allowed: Callable[[int], bool]) -> int | None:
    floor = limit // 3
    for positions in (
        (m.start() for m in _PARAGRAPH.finditer(text)),
        (m.end() for m in sentences.ends(text)),
        (m.start() for m in _LINE.finditer(text)),
        (m.start() for m in _SPACE.finditer(text)),
    ):
        pos = _last(positions, limit, floor, allowed)
        if pos is not None:
            return pos
    return None


def cut_point(text: str, limit: int, allowed: Callable[[int], bool] = lambda pos: True) -> int:
    """Where to end a piece of at most `limit` characters: the cleanest allowed boundary,
    else the cleanest boundary (a word is never halved while a space is in reach)."""
    pos = _boundary(text, limit, allowed)
    if pos is None:
        pos = _boundary(text, limit, lambda _pos: True)
    if pos is not None:
        return pos
    cut = limit
    tail = _ENTITY_TAIL.search(text[max(0, cut - 5) : cut])  # never halve an &amp; entity
    if tail:
        cut -= len(tail.group(0))
    return cut


def _split(text: str, limit: int, cut: Callable[[str, int], int]) -> list[str]:
    text = text.strip()
    pieces: list[str] = []
    while len(text) > limit:
        at = cut(text, limit)
        piece = text[:at].rstrip()
        if piece:
            pieces.append(piece)
        text = text[at:].lstrip()
    if text:
        pieces.append(text)
    return pieces


def split_text(text: str, limit: int = SECTION_TEXT_MAX) -> list[str]:
    """Pieces of at most `limit` characters whose words, in order, are the text's words."""
    return _split(text, limit, cut_point)


def protected_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of what a markdown cut keeps whole; a cut at p is inside when start < p < end."""
    spans = [m.span() for m in _PROTECTED.finditer(text)]
    for m in _FLAG.finditer(text):
        spans.append((max(0, m.start() - 1), m.end()))  # not even just before it
    return spans


def _inside(spans: list[tuple[int, int]]) -> Callable[[int], bool]:
    """Whether a position is inside one of the spans, by binary search over their union
    (asking each span for each candidate position was quadratic in a text of many spans)."""
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    starts = [a for a, _ in merged]

    def inside(pos: int) -> bool:
        i = bisect_left(starts, pos) - 1  # the last span starting before pos
        return i >= 0 and pos < merged[i][1]

    return inside


def markdown_cut(text: str, limit: int) -> int:
    inside = _inside(protected_spans(text))
    return cut_point(text, limit, lambda pos: not inside(pos))


def split_markdown(text: str, limit: int = MARKDOWN_MAX) -> list[str]:
    """Pieces of at most `limit` characters, cut cleanly (never inside a quotation, a link,
        code or a flag unless what is kept whole, flags of one quotation chained together, is
    longer than the limit: then at the cleanest boundary in reach, never inside a word)."""
    return _split(text, limit, markdown_cut)
