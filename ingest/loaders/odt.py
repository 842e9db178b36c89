"""OpenDocument text (.odt) into sections.

Read: content.xml's office:text, and meta.xml's title. text:h is a heading at its
text:outline-level (1 when it has none); text:p, each list item's paragraph and each note's
paragraph are paragraphs; a table row is one paragraph. Left out: indexes (a table of
contents and the like: their text is generated from the body), the deleted text of
tracked changes, annotations (comments), a note's citation mark, and alt text of frames.
"""

from __future__ import annotations

from pathlib import Path

from ingest.document import LoadedDocument
from ingest.limits import DEFAULT_LIMITS, Limits
from ingest.loaders.common import Outline
from ingest.loaders.flow import Flow, TextBudget
from ingest.loaders.package import End, Package, Start
from search.errors import IngestError

MIMETYPE = b"application/vnd.oasis.opendocument.text"


class _Content:
    """content.xml's paragraphs, headings and tables, into a Flow."""

    SKIP = (
        "text:tracked-changes",
        "office:annotation",
        "text:note-citation",
        "svg:title",
        "svg:desc",
        "text:table-of-content",
        "text:illustration-index",
        "text:table-index",
        "text:object-index",
        "text:user-index",
        "text:alphabetical-index",
        "text:bibliography",
        "office:forms",
        "office:automatic-styles",
        "office:font-face-decls",
        "office:scripts",
    )
    CELLS = ("table:table-cell", "table:covered-table-cell")
    # Spaces, a tab, a line break: one blank once white space is collapsed.
    BLANKS = ("text:s", "text:tab", "text:line-break")

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.levels: list[int | None] = []  # each open paragraph's heading level
        blank: Start = lambda _: flow.add(" ")
        skip: Start = lambda _: flow.skip()
        self.starts: dict[str, Start] = {
            "text:p": self._paragraph,
            "text:h": self._heading,
            "table:table-row": lambda _: flow.open_row(),
            **dict.fromkeys(self.CELLS, lambda _: flow.open_cell()),
            **dict.fromkeys(self.BLANKS, blank),
            **dict.fromkeys(self.SKIP, skip),
        }
        self.ends: dict[str, End] = {
            "text:p": self._paragraph_end,
            "text:h": self._paragraph_end,
            "table:table-row": flow.close_row,
            **dict.fromkeys(self.CELLS, flow.close_cell),
            **dict.fromkeys(self.SKIP, flow.unskip),
        }
        self.text = flow.add

    def _paragraph(self, attrs: dict[str, str]) -> None:
        self.flow.open_paragraph()
        self.levels.append(None)

    def _heading(self, attrs: dict[str, str]) -> None:
        self.flow.open_paragraph()
        try:
            level = min(9, max(1, int(attrs.get("text:outline-level", "1"))))
        except ValueError:
            level = 1
        self.levels.append(level)

    def _paragraph_end(self) -> None:
        if self.levels:
            self.flow.close_paragraph(self.levels.pop())


def load_odt(data: bytes, source: str, limits: Limits = DEFAULT_LIMITS) -> LoadedDocument:
    """An .odt file as sections: text:h headings by outline level, lists, tables, title."""
    package = Package(data, source, "OpenDocument text", ".odt", limits)
    if package.has("mimetype"):
        mimetype = package.read("mimetype").strip()
        if mimetype != MIMETYPE:
            raise IngestError(
                f"{source}: not an OpenDocument text (its mimetype is {mimetype.decode('ascii', 'replace')[:80]!r})"
            )
    outline = Outline()
    content = _Content(Flow(outline, TextBudget(source, limits)))
    package.parse("content.xml", content)
    title = package.title("meta.xml") or outline.first_heading() or Path(source).stem
    return LoadedDocument(source, title, "odt", outline.result())
