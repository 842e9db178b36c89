"""What every loader shares: the outline that turns a stream of headings and paragraphs into
sections, the decoding of a text file's bytes (Markdown, plain text and HTML), and the
per-file budget of inflated bytes (PDF streams, the XML parts of office files).
"""

from __future__ import annotations

from ingest.document import Paragraph, Section
from ingest.limits import Limits, over
from search.errors import IngestError


class Outline:
    """Builds sections from a stream of headings and paragraphs."""

    def __init__(self) -> None:
        self.path: list[tuple[int, str, str | None]] = []
        self.sections: list[Section] = [Section(())]
        self.paragraph_count = 0

    def heading(self, level: int, title: str, anchor: str | None = None) -> None:
        title = " ".join(title.split())
        if not title:
            return
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, title, anchor))
        # A heading without an id of its own is reached through the nearest one above it.
        nearest = next((a for _, _, a in reversed(self.path) if a), None)
        self.sections.append(
            Section(tuple(t for _, t, _ in self.path), anchor=nearest, anchors=tuple(a for _, _, a in self.path))
        )

    def paragraph(self, text: str, page: str | None = None) -> None:
        if text.strip():
            self.sections[-1].paragraphs.append(Paragraph(text, page))
            self.paragraph_count += 1

    def result(self) -> list[Section]:
        return [s for s in self.sections if s.paragraphs]

    def first_heading(self) -> str | None:
        for s in self.sections:
            if s.heading_path:
                return s.heading_path[0]
        return None


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 text (a BOM is dropped); anything else is an IngestError with a reason."""
    if b"\x00" in data[:8192]:
        raise IngestError(f"{source}: binary content (NUL bytes) in a text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(
            f"{source}: not UTF-8 ({exc.reason} at byte {exc.start:,}); convert it, e.g. iconv -f latin1 -t utf-8"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


class InflationBudget:
    """The bytes one file has inflated so far (PDF streams, zip members), against
    Limits.max_inflated_file_bytes: a file of many parts, each under the per-part limit
    (max_inflated_bytes), is refused by their sum before it costs more."""

    def __init__(self, source: str, what: str, limits: Limits) -> None:
        self.source, self.what, self.limit = source, what, limits.max_inflated_file_bytes
        self.total = 0

    def charge(self, n: int, where: str) -> None:
        """Count n more inflated bytes, read at `where` ("page 3", "word/document.xml")."""
        self.total += n
        if self.total > self.limit:
            raise over(
                f"{self.source}: {self.what} inflate to",
                f"{self.total:,} bytes by {where}",
                self.limit,
                "CITEBOT_INGEST_MAX_INFLATED_FILE_BYTES",
            )
