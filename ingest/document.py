"""What a loader returns: a document as sections of verbatim paragraphs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Paragraph:
    """One paragraph as it stands in the source (page label for paged formats)."""

    text: str
    page: str | None = None


@dataclass
class Section:
    """The paragraphs under one heading path; a chunk never spans two sections."""

    heading_path: tuple[str, ...]
    paragraphs: list[Paragraph] = field(default_factory=list)
    # The id a browser scrolls to for this heading (or the nearest enclosing one), if any.
    anchor: str | None = None
    # Each heading's own id along the path (None where it has none), when the loader knows
    # them: the anchor of an enclosing heading, for a chunk that joins short sections.
    anchors: tuple[str | None, ...] = ()

    def anchor_of(self, depth: int) -> str | None:
        """The anchor of this section's heading path cut to `depth` headings (the nearest
        id at or above it); None when unknown."""
        if depth == len(self.heading_path):
            return self.anchor
        if len(self.anchors) != len(self.heading_path):
            return None
        return next((a for a in reversed(self.anchors[:depth]) if a), None)


# A document that says, near its top, that it no longer holds: its passages are still
# found, but rank below current ones and are marked. The sample handbook's 2022 runbook
# ("DEPRECATED") and 2023 travel policy ("Superseded") outranked their current versions
# for "Which version of Klaxon…?" (dev a-15).
_SUPERSEDED = re.compile(
    r"\b(deprecated|superseded|obsolete|no longer (?:current|valid|in use|in force|maintained))\b", re.IGNORECASE
)
# How much of the document's opening is read for that notice.
STATUS_WINDOW_CHARS = 600


@dataclass
class LoadedDocument:
    """A file turned into sections, ready for the chunker."""

    source: str
    title: str
    format: str
    sections: list[Section]
    # The document's own address as written (`url:` front matter, <link rel="canonical">);
    # ingest checks it (search/links.py) before it is stored.
    url: str | None = None

    def superseded(self) -> bool:
        """Whether the title or the opening says the document is deprecated or superseded."""
        opening = " ".join(p.text for s in self.sections for p in s.paragraphs)[:STATUS_WINDOW_CHARS]
        return bool(_SUPERSEDED.search(self.title) or _SUPERSEDED.search(opening))
