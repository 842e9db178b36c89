"""A passage's text as the extractive answer quotes it.

A quotation is a double-quoted span (bot/answer/checks.py QUOTE_RE), so it cannot hold a
double quote mark of the source's: each is shown as the single mark of its kind (straight
for straight, curly for curly), `as "the Conductor", is` quoted as `as 'the Conductor', is`.
The checks verify it through the one normaliser (checks.normalise), which reads every quote
mark, straight or curly, single or double, as one. A [N] of the document's own would read as
our citation: it is shown as an ellipsis, a gap the check allows.
"""

from __future__ import annotations

import re

# Each double mark a quotation cannot hold, and the single mark it is shown as.
_INNER = {'"': "'", "\u201c": "\u2018", "\u201d": "\u2019", "\u201e": "\u201a"}
_INNER_RE = re.compile("[" + "".join(_INNER) + "]")
_MARKER = re.compile(r"\[\d+\]")


def quotation(text: str) -> str:
    """A passage's text as the answer quotes it: white space collapsed, each double quote
    mark inside it shown as a single one, each [N] as an ellipsis (`issue [2] "show errors"`
    is quoted as `issue … 'show errors'` and still verified word for word)."""
    text = " ".join(text.split())
    text = _INNER_RE.sub(lambda m: _INNER[m.group(0)], text)
    if _MARKER.search(text):
        text = " ".join(_MARKER.sub(" … ", text).split())
        text = _strip_ellipses(text)
        text = re.sub(r"…(?:\s*…)+", "…", text)
    return text


def _strip_ellipses(text: str) -> str:
    """The text without the ellipses it starts or ends with (its blanks are single spaces
    here). Not the regex "(?:\\s*…)+$": searched from each ellipsis of a text full of
    them, it read to the end from each."""
    return text.strip("… ")
