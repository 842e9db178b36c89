"""Loaders: Markdown, HTML, plain text and PDF into sections of verbatim paragraphs.

Paragraph text is kept as the source has it (Markdown and text: the lines between
blank lines, byte for byte; HTML: the text as displayed, entities decoded and white
space collapsed as a browser does; PDF: the extracted lines of a paragraph joined by
single spaces). Headings become the heading path, never paragraph text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from ingest.document import LoadedDocument, Paragraph, Section
from search.errors import IngestError

FORMATS = {
    ".md": "markdown", ".markdown": "markdown", ".txt": "text", ".text": "text",
    ".html": "html", ".htm": "html", ".pdf": "pdf",
}

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```+|~~~+)")
_FRONT_MATTER = "---"


class _Outline:
    """Builds sections from a stream of headings and paragraphs."""

    def __init__(self) -> None:
        self.path: list[tuple[int, str]] = []
        self.sections: list[Section] = [Section(())]

    def heading(self, level: int, title: str) -> None:
        title = " ".join(title.split())
        if not title:
            return
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, title))
        self.sections.append(Section(tuple(t for _, t in self.path)))

    def paragraph(self, text: str, page: str | None = None) -> None:
        if text.strip():
            self.sections[-1].paragraphs.append(Paragraph(text, page))

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
        raise IngestError(f"{source}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def load_markdown(text: str, source: str, *, atx: bool = True, fmt: str = "markdown") -> LoadedDocument:
    """Markdown (ATX and setext headings, fenced code kept whole) or setext-only text."""
    lines = text.split("\n")
    if atx and lines and lines[0].strip() == _FRONT_MATTER:
        for i in range(1, len(lines)):
            if lines[i].strip() == _FRONT_MATTER:
                lines = lines[i + 1 :]
                break
    outline = _Outline()
    para: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if para:
            outline.paragraph("\n".join(para))
            para.clear()

    for i, line in enumerate(lines):
        if fence is not None:
            para.append(line)
            if line.strip().startswith(fence):
                fence = None
                flush()
            continue
        m = _FENCE.match(line) if atx else None
        if m:
            flush()
            fence = m.group(1)[:3]
            para.append(line)
            continue
        h = _ATX.match(line) if atx else None
        if h:
            flush()
            outline.heading(len(h.group(1)), h.group(2))
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not para and _SETEXT.match(nxt) and not _SETEXT.match(line):
            # A one-line paragraph underlined with === or --- is a heading.
            outline.heading(1 if nxt.strip().startswith("=") else 2, line.strip())
            continue
        if _SETEXT.match(line) and not para and i > 0 and lines[i - 1].strip():
            continue  # the underline of the heading just taken
        if not line.strip():
            flush()
        else:
            para.append(line)
    flush()
    title = outline.first_heading() or Path(source).stem
    return LoadedDocument(source, title, fmt, outline.result())


class _HTMLOutline(HTMLParser):
    BLOCKS = {"p", "li", "pre", "blockquote", "dd", "dt", "tr", "figcaption", "caption",
              "div", "section", "article", "td", "th", "br", "table", "ul", "ol", "dl", "hr"}
    SKIP = {"script", "style", "noscript", "template", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.outline = _Outline()
        self.buf: list[str] = []
        self.heading_level: int | None = None
        self.heading_buf: list[str] = []
        self.skip = 0
        self.title: list[str] = []
        self.in_title = False
        self.cells: list[str] | None = None

    def _flush(self) -> None:
        text = " ".join("".join(self.buf).split())
        self.buf.clear()
        if text:
            self.outline.paragraph(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "title":
            self.in_title = True
        if tag in self.SKIP:
            self.skip += 1
            return
        if re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self.heading_level = int(tag[1])
            self.heading_buf = []
        elif tag == "tr":
            self._flush()
            self.cells = []
        elif tag in ("td", "th") and self.cells is not None:
            self.buf.clear()
        elif tag in self.BLOCKS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if re.fullmatch(r"h[1-6]", tag) and self.heading_level is not None:
            self.outline.heading(self.heading_level, "".join(self.heading_buf))
            self.heading_level = None
        elif tag in ("td", "th") and self.cells is not None:
            self.cells.append(" ".join("".join(self.buf).split()))
            self.buf.clear()
        elif tag == "tr" and self.cells is not None:
            row = " | ".join(c for c in self.cells if c)
            self.cells = None
            if row:
                self.outline.paragraph(row)
        elif tag in self.BLOCKS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        if self.skip:
            return
        if self.heading_level is not None:
            self.heading_buf.append(data)
        else:
            self.buf.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def load_html(text: str, source: str) -> LoadedDocument:
    parser = _HTMLOutline()
    parser.feed(text)
    parser.close()
    title = " ".join("".join(parser.title).split()) or parser.outline.first_heading()
    return LoadedDocument(source, title or Path(source).stem, "html", parser.outline.result())


# A numbered heading line in a PDF: "2. Protective Equipment", "2.1 Safety Boots".
_PDF_HEADING = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+([A-Z][^.!?]{1,80})$")


_DOT_LEADER = re.compile(r"\.{6,}\s*\S+$")


def load_pdf(data: bytes, source: str) -> LoadedDocument:
    """PDF pages with their printed page labels; numbered lines become headings."""
    import io

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        labels = list(reader.page_labels)
        pages = [(labels[i] if i < len(labels) else str(i + 1), p) for i, p in enumerate(reader.pages)]
        texts = [(label, page.extract_text(extraction_mode="layout") or "") for label, page in pages]
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise IngestError(f"{source}: unreadable PDF ({exc})") from exc
    outline = _Outline()
    meta_title = (reader.metadata.title if reader.metadata else None) or None
    para: list[str] = []
    para_page: str | None = None

    def flush() -> None:
        nonlocal para_page
        if para:
            outline.paragraph(" ".join(para), para_page)
            para.clear()
        para_page = None

    for label, text in texts:
        for raw in text.split("\n"):
            line = " ".join(raw.split())
            if not line:
                flush()
                continue
            if re.fullmatch(r"[-–—\s]*" + re.escape(label) + r"[-–—\s]*", line):
                continue  # the printed page number in the footer
            if _DOT_LEADER.search(line):
                continue  # a table-of-contents entry points at text; it is not text
            h = _PDF_HEADING.match(line)
            if h and not para:
                level = h.group(1).count(".") + 1
                outline.heading(level, line)
                continue
            if not para:
                para_page = label
            para.append(line)
        flush()  # a paragraph never runs across a page in our own PDFs; split there
    title = meta_title or outline.first_heading() or Path(source).stem
    return LoadedDocument(source, str(title), "pdf", outline.result())


def load(path: Path, source: str) -> LoadedDocument:
    """Load one file by its extension; IngestError says why a file cannot be used."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise IngestError(f"{source}: unsupported format {path.suffix or '(no extension)'!r}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"{source}: unreadable ({exc.strerror or exc})") from exc
    if not data.strip():
        raise IngestError(f"{source}: empty file")
    if fmt == "pdf":
        if not data.startswith(b"%PDF"):
            raise IngestError(f"{source}: not a PDF (no %PDF header)")
        doc = load_pdf(data, source)
    else:
        text = decode_text(data, source)
        if fmt == "markdown":
            doc = load_markdown(text, source)
        elif fmt == "text":
            doc = load_markdown(text, source, atx=False, fmt="text")
        else:
            doc = load_html(text, source)
    if not doc.sections:
        raise IngestError(f"{source}: no text found")
    return doc
