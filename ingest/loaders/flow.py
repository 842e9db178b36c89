"""The text flow of an office file's XML part into the outline, as the HTML loader reads a
page: a heading becomes the heading path, each paragraph and each list item a paragraph of
its own (white space collapsed as displayed), each table row one paragraph of its cells
joined by " | ". Shared by the .docx, .pptx and .odt loaders, which say what starts and
ends each of these in their format.
"""

from __future__ import annotations

from ingest.limits import Limits, over
from ingest.loaders.common import Outline


class TextBudget:
    """Characters of text read from one file so far, against Limits.max_chars: counted as the
    text arrives, so a part of one huge paragraph is refused before it is joined and split."""

    def __init__(self, source: str, limits: Limits) -> None:
        self.source, self.limit, self.chars = source, limits.max_chars, 0

    def add(self, n: int) -> None:
        self.chars += n
        if self.chars > self.limit:
            raise over(
                f"{self.source}: text of", f"over {self.limit:,} characters", self.limit, "CITEBOT_INGEST_MAX_CHARS"
            )


class Flow:
    """Paragraphs, table rows and skipped subtrees as a part's elements open and close.

    A paragraph opened inside another (a text box or a note in ODF and Word) is a paragraph
    of its own, emitted when it ends; a paragraph inside a table cell is the cell's text; a
    table inside a cell adds its rows to that cell's text.
    """

    def __init__(self, outline: Outline, budget: TextBudget) -> None:
        self.outline, self.budget = outline, budget
        self.paragraphs: list[list[str]] = []  # the open paragraphs' text pieces, innermost last
        self.rows: list[list[str]] = []  # the open table rows' cells
        self.cells: list[list[str]] = []  # the open cells' paragraphs
        self.skipping = 0  # open elements whose text is not read (deleted, an index, a fallback)

    # -- paragraphs -------------------------------------------------------------------
    def open_paragraph(self) -> None:
        self.paragraphs.append([])

    def add(self, text: str) -> None:
        if self.paragraphs and not self.skipping:
            self.budget.add(len(text))
            self.paragraphs[-1].append(text)

    def close_paragraph(self, heading_level: int | None = None) -> str:
        """End the innermost paragraph; a heading (level 1-9) outside tables opens a section.
        Returns its text (white space collapsed)."""
        if not self.paragraphs:
            return ""
        pieces = self.paragraphs.pop()
        text = " ".join("".join(pieces).split()) if pieces else ""
        if not text:
            return text
        if self.cells:
            self.cells[-1].append(text)
        elif heading_level is not None:
            self.outline.heading(heading_level, text)
        else:
            self.outline.paragraph(text)
        return text

    def drop_paragraph(self) -> None:
        """End the innermost paragraph, its text left out (a table of contents entry)."""
        if self.paragraphs:
            self.paragraphs.pop()

    # -- tables -----------------------------------------------------------------------
    def open_row(self) -> None:
        self.rows.append([])

    def open_cell(self) -> None:
        self.cells.append([])

    def close_cell(self) -> None:
        if self.cells:
            text = " ".join(self.cells.pop())
            if self.rows:
                self.rows[-1].append(text)

    def close_row(self) -> None:
        if not self.rows:
            return
        row = " | ".join(c for c in self.rows.pop() if c)
        if not row:
            return
        if self.cells:  # a table inside a cell: its rows are that cell's text
            self.cells[-1].append(row)
        else:
            self.outline.paragraph(row)

    # -- subtrees left out ------------------------------------------------------------
    def skip(self) -> None:
        self.skipping += 1

    def unskip(self) -> None:
        self.skipping = max(0, self.skipping - 1)
