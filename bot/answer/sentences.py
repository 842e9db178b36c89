"""The one sentence splitter: passages into sentences (the extractive composer), answers
into cited sentences (the checks), long texts cut at sentence ends (Slack rendering).

A sentence ends at . ! ? or … with the closing quotes and brackets after it, its [N]
markers and a full stop after those (`later." [2].`), when white space and no lower-case
letter follow, or the text ends; and at every line break. So "1.4 billion" and "e.g. the
bay" do not end a sentence, and neither does a full stop inside "quay-2.example.com".
The marks of the scripts that put a space after a sentence, as Latin does, end one under
the same rule: the danda and double danda (Devanagari: Hindi, Marathi, Nepali), Urdu's full
stop, the Arabic question mark (Arabic, Persian, Urdu), the Armenian full stop, Ethiopic's
full stop, question mark and paragraph separator, the Burmese section mark. Chinese and
Japanese put no space after a sentence: their full-width marks (。！？, the half-width ｡,
and ． but not in "１．５" or "ｅｘａｍｐｌｅ．ｃｏｍ") end one with nothing after them, the closing
brackets and quotes (」』）”) and [N] markers after them kept with it, unless the quotation
they close runs on into the sentence (「保存しました。」と表示されます。).

Passages of plain-text manuals are hard-wrapped: a sentence runs over several lines
(haproxy's guides wrap at 80 columns, Chinese text at 40 wide characters). With
`wrapped=True` (the extractive composer) a line break inside such prose is no end: see
`_continues`. The checks and Slack rendering cut at every line break, as before.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

# The marks that end a sentence when white space (or the end of the text) follows: Latin's,
# then ।॥ (Devanagari), ۔ (Urdu), ؟ (Arabic), ։ (Armenian), ። ፧ ፨ (Ethiopic), ။ (Burmese).
SPACED_MARKS = ".!?\u2026\u0964\u0965\u06d4\u061f\u0589\u1362\u1367\u1368\u104b"
# The marks of Chinese and Japanese, which end a sentence with nothing after them: 。！？ and
# the half-width ｡; the full-width ． too, but not beside a digit ("１．５") or before a
# Latin letter ("ｅｘａｍｐｌｅ．ｃｏｍ").
UNSPACED_MARKS = "\u3002\uff01\uff1f\uff61"
_DIGITS = "0-9\uff10-\uff19"
_LATIN = "A-Za-z\uff21-\uff3a\uff41-\uff5a"  # and their full-width forms
# A run of them, read from its first mark only: from each mark of a long run whose closing
# bracket runs on into the text (below) the run would be read again, quadratic.
_RUN = (
    rf"[{UNSPACED_MARKS}\uff0e](?<![{UNSPACED_MARKS}\uff0e].)(?<![{_DIGITS}]\uff0e)(?!(?<=\uff0e)[{_DIGITS}{_LATIN}])"
    rf"(?:[{UNSPACED_MARKS}]|(?<![{_DIGITS}])\uff0e(?![{_DIGITS}{_LATIN}]))*+"
)
_CLOSERS = "\"'\u201d\u2019\u00bb)\\]"  # " ' ” ’ » ) ]
# 」』）】〕〉》｣ ” ’ ) ]: not a straight quote, which after 。 as often opens the next sentence,
# unless a [N] marker follows it: `"好。" [1]` is a quotation the answer cites, closed there
# (else the sentence ran on to the next end, and cited_sentences judged it with the next).
_CJK_CLOSERS = "\u300d\u300f\uff09\u3011\u3015\u3009\u300b\uff63\u201d\u2019)\\]"
_MARKERS = r"(?:\s*\[\d+\])*"

# A Chinese or Japanese mark ends no sentence when the quotation or bracket it closes runs
# on into the sentence (「保存しました。」と表示されます。 is one sentence), as a lower-case
# letter after `."` does in Latin script. The lookahead first: one test of a character that
# can start an end, where trying each alternative at every character took 35% longer.
SENTENCE_END = re.compile(
    rf"(?=[{SPACED_MARKS}{UNSPACED_MARKS}\uff0e\n])(?:"
    rf"[{SPACED_MARKS}][{_CLOSERS}]*{_MARKERS}[.!?]?(?=\s+(?![a-z])|\s*$)"
    rf"|{_RUN}(?:[{_CJK_CLOSERS}]++(?=[\s\[]|$)|\"(?=\s*\[\d+\])|(?![{_CJK_CLOSERS}])){_MARKERS}"
    r"|\n\s*\n|\n)"
)


def unspaced(end: str) -> bool:
    """Whether a sentence end (a match of SENTENCE_END) is a Chinese or Japanese mark's,
    which needs no white space after it."""
    return bool(end) and (end[0] in UNSPACED_MARKS or end[0] == "\uff0e")


def ends(text: str) -> Iterator[re.Match[str]]:
    """The sentence ends of a text, in order (the matches' spans)."""
    return SENTENCE_END.finditer(text)


# A wrapped line: at least this many columns. Hard-wrapped prose fills its lines to 70-80
# columns; list items, table rows and code lines that end short are kept apart.
WRAPPED_LINE_MIN = 50
_LIST_START = re.compile(r"\s*(?:[-*+•]\s|\d+[.)]\s|\||$)")


def _columns(line: str) -> int:
    """The columns a line fills: a wide character (Chinese, Japanese, Korean) fills two, so
    Chinese prose wrapped at 80 columns, 40 characters a line, reads as wrapped."""
    if line.isascii():
        return len(line)
    return len(line) + sum(1 for c in line if unicodedata.east_asian_width(c) in "WF")


def _continues(text: str, newline: int) -> bool:
    """Whether the line break at `newline` sits inside wrapped prose: the line before is
    long and ends in no colon, semicolon or brace, and the line after is indented no deeper and starts no list
    item, table row or blank line."""
    line_start = text.rfind("\n", 0, newline) + 1
    line = text[line_start:newline]
    if _columns(line) < WRAPPED_LINE_MIN or line.rstrip().endswith((":", ";", "{", "}")):
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
