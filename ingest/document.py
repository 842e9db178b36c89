"""What a loader returns: a document as sections of verbatim paragraphs."""

from __future__ import annotations

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


@dataclass
class LoadedDocument:
    """A file turned into sections, ready for the chunker."""

    source: str
    title: str
    format: str
    sections: list[Section]

    def paragraph_count(self) -> int:
        return sum(len(s.paragraphs) for s in self.sections)
