"""Word documents (.docx, Office Open XML) into sections.

Read: the main document part (found through the package's relationships), its styles
(which paragraph styles are headings, and at what level) and docProps/core.xml's title.
A paragraph is a heading when its outline level says so (w:outlineLvl 0-8, its own or
its style's, inherited through w:basedOn) or its style is named "heading N" or "Title";
list items (w:numPr) and other paragraphs are paragraphs; a table row is one paragraph.
Left out: deleted text of tracked changes (w:delText), field codes (w:instrText), the
fallback copy of a text box (mc:Fallback), a table of contents (its w:sdt, or paragraphs
of a "TOC N" style), and the parts beside the body: headers, footers, footnotes, comments.
"""

from __future__ import annotations

import re
from pathlib import Path

from ingest.document import LoadedDocument
from ingest.limits import DEFAULT_LIMITS, Limits
from ingest.loaders.common import Outline
from ingest.loaders.flow import Flow, TextBudget
from ingest.loaders.package import End, Package, Simple, Start

# Style names Word and LibreOffice give headings ("heading 1", "Heading 1") and tables of
# contents ("toc 1", "Contents 1"); matched on w:name, which does not change with the
# user interface's language (w:styleId may).
_HEADING_NAME = re.compile(r"heading ([1-9])", re.IGNORECASE)
_TOC_NAME = re.compile(r"(toc|contents) ?[1-9]|toc heading|contents heading", re.IGNORECASE)
_TITLE = "title"
_BODY_LEVEL = 9  # w:outlineLvl 9 is body text


class _Styles(Simple):
    """Paragraph styles: each one's name, own outline level and base."""

    def __init__(self) -> None:
        super().__init__(
            {
                "w:style": self._style,
                "w:name": self._name,
                "w:basedOn": self._based_on,
                "w:outlineLvl": self._outline_level,
            },
            {"w:style": self._style_end},
        )
        self.name: dict[str, str] = {}
        self.own_level: dict[str, int] = {}
        self.based_on: dict[str, str] = {}
        self.current: str | None = None

    def _style(self, attrs: dict[str, str]) -> None:
        self.current = attrs.get("w:styleId") if attrs.get("w:type", "paragraph") == "paragraph" else None

    def _style_end(self) -> None:
        self.current = None

    def _name(self, attrs: dict[str, str]) -> None:
        if self.current is not None:
            self.name[self.current] = attrs.get("w:val", "")

    def _based_on(self, attrs: dict[str, str]) -> None:
        if self.current is not None:
            self.based_on[self.current] = attrs.get("w:val", "")

    def _outline_level(self, attrs: dict[str, str]) -> None:
        if self.current is not None:
            self.own_level[self.current] = _level(attrs)

    def level(self, style: str | None) -> int | None:
        """The heading level (1-9) of paragraphs of this style; None for body text."""
        seen: set[str] = set()
        while style and style not in seen:  # a basedOn cycle ends the walk
            seen.add(style)
            name = self.name.get(style, "")
            if style in self.own_level:
                lvl = self.own_level[style]
                return None if lvl >= _BODY_LEVEL else lvl + 1
            m = _HEADING_NAME.fullmatch(name)
            if m:
                return int(m.group(1))
            if name.lower() == _TITLE:
                return 1
            style = self.based_on.get(style)
        return None

    def tocs(self) -> set[str]:
        """The styles of table-of-contents entries."""
        return {s for s, name in self.name.items() if _TOC_NAME.fullmatch(name)}


def _level(attrs: dict[str, str]) -> int:
    try:
        return int(attrs.get("w:val", ""))
    except ValueError:
        return _BODY_LEVEL


class _Body:
    """The document part's paragraphs, headings and tables, into a Flow."""

    # Marks that display as a blank; subtrees whose text is not the document's.
    BLANKS = ("w:tab", "w:br", "w:cr", "w:ptab")
    SKIP = ("mc:Fallback", "w:del", "w:moveFrom")

    def __init__(self, styles: _Styles, flow: Flow) -> None:
        self.styles, self.flow = styles, flow
        self.tocs = styles.tocs()
        self.in_text = 0
        # Each open paragraph's [style, own outline level].
        self.props: list[list] = []
        self.sdt: list[bool] = []  # open content controls: is each a table of contents?
        self.title: str | None = None
        blank: Start = lambda _: flow.add(" ")
        skip: Start = lambda _: flow.skip()
        self.starts: dict[str, Start] = {
            "w:t": self._text_on,
            "w:p": self._paragraph,
            "w:pStyle": self._style,
            "w:outlineLvl": self._outline_level,
            "w:noBreakHyphen": lambda _: flow.add("-"),
            "w:tr": lambda _: flow.open_row(),
            "w:tc": lambda _: flow.open_cell(),
            "w:sdt": lambda _: self.sdt.append(False),
            "w:docPartGallery": self._gallery,
            **dict.fromkeys(self.BLANKS, blank),
            **dict.fromkeys(self.SKIP, skip),
        }
        self.ends: dict[str, End] = {
            "w:t": self._text_off,
            "w:p": self._paragraph_end,
            "w:tc": flow.close_cell,
            "w:tr": flow.close_row,
            "w:sdt": self._sdt_end,
            **dict.fromkeys(self.SKIP, flow.unskip),
        }

    def _text_on(self, attrs: dict[str, str]) -> None:
        self.in_text += 1

    def _text_off(self) -> None:
        self.in_text -= 1

    def _paragraph(self, attrs: dict[str, str]) -> None:
        self.flow.open_paragraph()
        self.props.append([None, None])

    def _style(self, attrs: dict[str, str]) -> None:
        if self.props:
            self.props[-1][0] = attrs.get("w:val")

    def _outline_level(self, attrs: dict[str, str]) -> None:
        if self.props:
            self.props[-1][1] = _level(attrs)

    def _gallery(self, attrs: dict[str, str]) -> None:
        if self.sdt and not self.sdt[-1] and "table of contents" in attrs.get("w:val", "").lower():
            self.sdt[-1] = True
            self.flow.skip()

    def _sdt_end(self) -> None:
        if self.sdt and self.sdt.pop():
            self.flow.unskip()

    def _paragraph_end(self) -> None:
        if not self.props:
            return
        style, own = self.props.pop()
        if style in self.tocs:
            self.flow.drop_paragraph()
            return
        if own is not None:
            level = None if own >= _BODY_LEVEL else own + 1
        else:
            level = self.styles.level(style) if style else None
        text = self.flow.close_paragraph(level)
        if self.title is None and text and style and self.styles.name.get(style, "").lower() == _TITLE:
            self.title = text

    def text(self, data: str) -> None:
        if self.in_text:
            self.flow.add(data)


def load_docx(data: bytes, source: str, limits: Limits = DEFAULT_LIMITS) -> LoadedDocument:
    """A .docx file as sections: headings by outline level or style, lists, tables, title."""
    package = Package(data, source, "Word document", ".docx", limits)
    main = package.related("", "officeDocument") or "word/document.xml"
    styles = _Styles()
    styles_part = package.related(main, "styles")
    if styles_part and package.has(styles_part):
        package.parse(styles_part, styles)
    outline = Outline()
    body = _Body(styles, Flow(outline, TextBudget(source, limits)))
    package.parse(main, body)
    title = (
        package.title(package.related("", "core-properties") or "docProps/core.xml")
        or body.title
        or outline.first_heading()
        or Path(source).stem
    )
    return LoadedDocument(source, title, "docx", outline.result())
