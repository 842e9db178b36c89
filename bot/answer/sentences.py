"""The one sentence splitter: passages into sentences (the extractive composer), answers
into cited sentences (the checks), long texts cut at sentence ends (Slack rendering).

A sentence ends at . ! ? or … with the closing quotes and brackets after it, its [N]
markers and a full stop after those (`later." [2].`), when white space and no lower-case
letter follow, or the text ends; and at every line break. So "1.4 billion" and "e.g. the
bay" do not end a sentence, and neither does a full stop inside "quay-2.example.com".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

SENTENCE_END = re.compile(
    r"[.!?\u2026][\"'\u201d\u2019)\]]*(?:\s*\[\d+\])*[.!?]?(?=\s+(?![a-z])|\s*$)"
    r"|\n\s*\n|\n")


def ends(text: str) -> Iterator[re.Match[str]]:
    """The sentence ends of a text, in order (the matches' spans)."""
    return SENTENCE_END.finditer(text)


def split_sentences(text: str) -> list[str]:
    """The sentences of a text, stripped, in order; blank pieces left out."""
    out: list[str] = []
    start = 0
    for m in ends(text):
        piece = text[start:m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out
