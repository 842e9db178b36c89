"""PowerPoint presentations (.pptx, Office Open XML) into sections: one a slide.

Slides are read in the presentation's order (p:sldIdLst). Each slide's title placeholder
is its heading (level 1; "Slide N" when it has none); the other shapes follow in reading
order: by position, top to bottom and then left to right (each top-level shape's offset,
a:off), or in file order when a shape on the slide has no offset of its own (PowerPoint
leaves it out of a placeholder that keeps its layout's place). Each text paragraph
(a bullet too) is a paragraph, each table row one paragraph, and the speaker notes (the
notes page's body placeholder) are paragraphs under the slide's heading, after its shapes.
Left out: slide numbers, dates, headers and footers, layouts and masters, the fallback
copy of an mc:AlternateContent, and the text of charts and SmartArt (parts of their own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ingest.document import LoadedDocument
from ingest.limits import DEFAULT_LIMITS, Limits
from ingest.loaders.common import Outline
from ingest.loaders.flow import Flow, TextBudget
from ingest.loaders.package import End, Package, Simple, Start
from search.errors import IngestError

_TITLES = frozenset({"title", "ctrTitle"})
_FURNITURE = frozenset({"sldNum", "dt", "ftr", "hdr", "sldImg"})
_SHAPES = frozenset({"p:sp", "p:grpSp", "p:graphicFrame", "p:cxnSp", "p:pic", "p:contentPart", "mc:AlternateContent"})


@dataclass
class _Shape:
    placeholder: str | None = None  # p:ph's type ("body" when it has none); None: not a placeholder
    position: tuple[int, int] | None = None  # (y, x) of its first a:off, in EMU
    outline: Outline = field(default_factory=Outline)

    def paragraphs(self) -> list[str]:
        return [p.text for s in self.outline.sections for p in s.paragraphs]


class _Slide:
    """The top-level shapes of one slide's (or notes page's) shape tree, with their text."""

    def __init__(self, budget: TextBudget) -> None:
        self.budget = budget
        self.shapes: list[_Shape] = []
        self.in_tree = 0  # open p:spTree elements
        self.nesting = 0  # open shape elements: a group holds shapes
        self.shape: _Shape | None = None
        self.flow: Flow | None = None
        self.in_text = 0
        self.starts: dict[str, Start] = {
            "p:spTree": self._tree,
            "a:t": self._text_on,
            "a:p": self._paragraph,
            "a:br": self._blank,
            "a:tr": self._row,
            "a:tc": self._cell,
            "p:ph": self._placeholder,
            "a:off": self._offset,
            "mc:Fallback": self._skip,
            **dict.fromkeys(_SHAPES, self._shape),
        }
        self.ends: dict[str, End] = {
            "p:spTree": self._tree_end,
            "a:t": self._text_off,
            "a:p": self._paragraph_end,
            "a:tc": self._cell_end,
            "a:tr": self._row_end,
            "mc:Fallback": self._unskip,
            **dict.fromkeys(_SHAPES, self._shape_end),
        }

    def _tree(self, attrs: dict[str, str]) -> None:
        self.in_tree += 1

    def _tree_end(self) -> None:
        self.in_tree -= 1

    def _shape(self, attrs: dict[str, str]) -> None:
        if not self.in_tree:
            return
        if self.nesting == 0:  # a top-level shape of the tree
            self.shape = _Shape()
            self.flow = Flow(self.shape.outline, self.budget)
            self.shapes.append(self.shape)
        self.nesting += 1

    def _shape_end(self) -> None:
        if self.in_tree and self.nesting:
            self.nesting -= 1
            if self.nesting == 0:
                self.shape, self.flow = None, None

    def _text_on(self, attrs: dict[str, str]) -> None:
        self.in_text += 1

    def _text_off(self) -> None:
        self.in_text -= 1

    def _paragraph(self, attrs: dict[str, str]) -> None:
        if self.flow:
            self.flow.open_paragraph()

    def _paragraph_end(self) -> None:
        if self.flow:
            self.flow.close_paragraph()

    def _blank(self, attrs: dict[str, str]) -> None:
        if self.flow:
            self.flow.add(" ")

    def _row(self, attrs: dict[str, str]) -> None:
        if self.flow:
            self.flow.open_row()

    def _row_end(self) -> None:
        if self.flow:
            self.flow.close_row()

    def _cell(self, attrs: dict[str, str]) -> None:
        if self.flow:
            self.flow.open_cell()

    def _cell_end(self) -> None:
        if self.flow:
            self.flow.close_cell()

    def _skip(self, attrs: dict[str, str]) -> None:
        if self.flow:
            self.flow.skip()

    def _unskip(self) -> None:
        if self.flow:
            self.flow.unskip()

    def _placeholder(self, attrs: dict[str, str]) -> None:
        if self.shape:
            self.shape.placeholder = attrs.get("type", "body")

    def _offset(self, attrs: dict[str, str]) -> None:
        if self.shape and self.shape.position is None:
            try:
                self.shape.position = (int(attrs.get("y", "")), int(attrs.get("x", "")))
            except ValueError:
                pass

    def text(self, data: str) -> None:
        if self.in_text and self.flow is not None:
            self.flow.add(data)

    def title(self) -> str:
        return " ".join(t for s in self.shapes if s.placeholder in _TITLES for t in s.paragraphs())

    def body(self) -> list[str]:
        """The other shapes' paragraphs in reading order (by position when every shape has one)."""
        shapes = [s for s in self.shapes if s.placeholder not in _TITLES and s.placeholder not in _FURNITURE]
        if all(s.position is not None for s in shapes):
            shapes.sort(key=lambda s: s.position or (0, 0))  # stable: file order breaks ties
        return [t for s in shapes for t in s.paragraphs()]

    def notes(self) -> list[str]:
        return [t for s in self.shapes if s.placeholder == "body" for t in s.paragraphs()]


class _SlideList(Simple):
    """presentation.xml's slide order: the relationship id of each p:sldId."""

    def __init__(self) -> None:
        super().__init__({"p:sldId": lambda attrs: self.ids.append(attrs.get("r:id", ""))})
        self.ids: list[str] = []


def load_pptx(data: bytes, source: str, limits: Limits = DEFAULT_LIMITS) -> LoadedDocument:
    """A .pptx file as sections: each slide's title a heading, its text, tables and notes."""
    package = Package(data, source, "PowerPoint presentation", ".pptx", limits)
    main = package.related("", "officeDocument") or "ppt/presentation.xml"
    slides = {rid: target for rid, kind, target in package.relationships(main) if kind == "slide"}
    order = _SlideList()
    package.parse(main, order)
    outline = Outline()
    budget = TextBudget(source, limits)
    first_title = None
    for number, rid in enumerate(order.ids, start=1):
        part = slides.get(rid)
        if part is None:
            raise IngestError(f"{source}: slide {number} names no part ({rid!r}): a damaged presentation")
        slide = _Slide(budget)
        package.parse(part, slide)
        title = slide.title()
        first_title = first_title or title
        outline.heading(1, title or f"Slide {number}")
        for text in slide.body():
            outline.paragraph(text)
        notes_part = package.related(part, "notesSlide")
        if notes_part and package.has(notes_part):
            notes = _Slide(budget)
            package.parse(notes_part, notes)
            for text in notes.notes():
                outline.paragraph(text)
    title = (
        package.title(package.related("", "core-properties") or "docProps/core.xml") or first_title or Path(source).stem
    )
    return LoadedDocument(source, title, "pptx", outline.result())
