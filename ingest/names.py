"""Source names a store may hold: UTF-8, one printable line.

A source name is shown as the provenance of every passage an answer cites; a line break,
a control character or a bidi override in it could forge that line (a second "source"
line) or make it read as another name, and a name that is not UTF-8 cannot be stored at
all. A file (or folder) with such a name is skipped, its name shown escaped in the reason.
"""

from __future__ import annotations

import os
import unicodedata

# Refused beside the controls (C0, DEL, C1: category Cc): the line and paragraph separators
# (a line break to the renderers that draw a citation) and the bidi controls (marks,
# embeddings, overrides, isolates) that reorder how the rest of the name reads.
REFUSED_CHARACTERS = frozenset(
    "\u2028\u2029"  # line, paragraph separator
    "\u061c\u200e\u200f"  # Arabic letter mark, left-to-right and right-to-left marks
    "\u202a\u202b\u202c\u202d\u202e"  # embeddings, pop, overrides
    "\u2066\u2067\u2068\u2069"  # isolates, pop
)


def _refused(ch: str) -> bool:
    return ch in REFUSED_CHARACTERS or unicodedata.category(ch) in ("Cc", "Cs")


def shown(name: str) -> str:
    """The name as a reason or a log line may print it: as it is when it is acceptable,
    else escaped (a Python literal: bytes when it is not UTF-8), one printable line."""
    if not any(_refused(ch) for ch in name):
        return name
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return repr(os.fsencode(name))  # the bytes on disk (undecodable ones escaped)
        except UnicodeEncodeError:
            return repr(name)
    return repr(name)  # escapes every character str.isprintable refuses, keeps "café" as it is


def name_refusal(name: str) -> str | None:
    """Why a file (or folder) of this name cannot be ingested, or None when it can."""
    bad = next((ch for ch in name if _refused(ch)), None)
    if bad is None:
        return None
    if unicodedata.category(bad) == "Cs":
        return f"the name {shown(name)} is not UTF-8 (a store holds UTF-8 names only); rename it to ingest it"
    label = unicodedata.name(bad, "a control character").lower()
    return (
        f"the name {shown(name)} holds U+{ord(bad):04X} ({label}), which would forge or disguise "
        "the source shown with an answer; rename it to ingest it"
    )
