"""A CSV file (a Notion database, a spreadsheet saved as CSV) as a table: its first row is
the header, and every other row one paragraph of its cells, each named by its column
("Name: Deploy freeze | Status: Done"), so a row read alone, as a passage is, still says
what each value is. Empty cells are left out; a row with no value is no paragraph.

The file's stem is the title, and the one heading every row stands under. The dialect is
the standard comma-separated one (RFC 4180, what Notion and spreadsheets write); a cell
longer than the text limit, or a file the csv module cannot read, is refused with why
(docs/decisions/0039-wiki-exports.md).
"""

from __future__ import annotations

import csv
import io
from pathlib import PurePosixPath

from ingest.document import LoadedDocument
from ingest.limits import DEFAULT_LIMITS, Limits
from ingest.loaders.common import Outline
from search.errors import IngestError

# Between one cell and the next in a row's paragraph: what HTML and office table rows use.
CELL_SEPARATOR = " | "


def load_csv(text: str, source: str, limits: Limits = DEFAULT_LIMITS) -> LoadedDocument:
    """A CSV file's rows as paragraphs under its title, each cell named by its header."""
    title = PurePosixPath(source).stem
    outline = Outline()
    outline.heading(1, title)
    # The csv module's own cap on one cell (128 KiB) would refuse a long text cell; the
    # file's text is bounded by max_chars already.
    csv.field_size_limit(max(limits.max_chars, 1))
    try:
        rows = csv.reader(io.StringIO(text, newline=""))
        header = [" ".join(h.split()) for h in next(rows, [])]
        if not any(header):
            raise IngestError(f"{source}: a CSV file with no header row")
        for row in rows:
            cells = []
            for i, value in enumerate(row):
                value = " ".join(value.split())
                if not value:
                    continue
                name = header[i] if i < len(header) and header[i] else f"column {i + 1}"
                cells.append(f"{name}: {value}")
            if cells:
                outline.paragraph(CELL_SEPARATOR.join(cells))
    except csv.Error as exc:
        raise IngestError(f"{source}: not a readable CSV file ({exc})") from None
    return LoadedDocument(source, title, "csv", outline.result())
