#!/usr/bin/env python3
"""Render equipment-handbook.txt as a small PDF, using only the standard library.

Usage:
    python3 make_pdf.py [--no-compress] [SOURCE] [OUTPUT]

By default it reads equipment-handbook.txt next to this script and writes
../handbook/people/equipment-handbook.pdf.

Source format (plain text):
  * The file starts with "Key: value" lines (Title, Subtitle, Edition, Owner)
    that are set on the title page. A blank line ends them.
  * After that, blocks are separated by blank lines.
  * A block that is a single line like "2. Protective Equipment" is a
    level-1 heading; "2.1 Safety Boots" is a level-2 heading.
  * Every other block is a paragraph; its lines are joined with spaces.

Layout rules:
  * A4 pages, Helvetica 10 pt body text, Helvetica-Bold headings, both as
    standard Type1 fonts with /WinAnsiEncoding (nothing is embedded).
  * Lines are wrapped at word boundaries only (no hyphenation), at most
    90 characters and never wider than the text column.
  * One blank line of space between paragraphs; a paragraph is never split
    across pages; a heading is kept with the paragraph that follows it;
    every level-1 section starts on a new page.
  * Page 1 is a title page and page 2 the contents; they are labelled i and
    ii, and the body pages 1, 2, 3 ... via a /PageLabels number tree in the
    document catalog. Each page prints its label in a footer like "- 3 -".
"""

from __future__ import annotations

import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SRC = HERE / "equipment-handbook.txt"
DEFAULT_OUT = HERE.parent / "handbook" / "people" / "equipment-handbook.pdf"

# Page geometry (points). A4 portrait.
PAGE_W, PAGE_H = 595, 842
MARGIN_L, MARGIN_R = 64, 64
MARGIN_TOP, MARGIN_BOTTOM = 72, 72
FOOTER_Y = 40
COLUMN_W = PAGE_W - MARGIN_L - MARGIN_R

BODY_SIZE, BODY_LEAD = 10, 14
H1_SIZE, H1_LEAD = 15, 22
H2_SIZE, H2_LEAD = 11, 16
FOOTER_SIZE = 9
WRAP_CHARS = 90

FONT_REGULAR = "F1"  # Helvetica
FONT_BOLD = "F2"  # Helvetica-Bold

# Advance widths of Helvetica for WinAnsi codes 32..126, in 1/1000 em.
_HELV = [
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,  # space - /
    556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,  # 0 - ?
    1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,  # @ - O
    667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,  # P - _
    333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,  # ` - o
    556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,  # p - ~
]
HELVETICA_WIDTHS = {chr(32 + i): w for i, w in enumerate(_HELV)}
BOLD_FACTOR = 1.07  # Helvetica-Bold runs slightly wider; good enough for centring.


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Approximate rendered width of text in points."""
    units = sum(HELVETICA_WIDTHS.get(ch, 556) for ch in text)
    width = units * size / 1000.0
    return width * BOLD_FACTOR if bold else width


def roman(n: int) -> str:
    """Lowercase roman numeral, as used by /S /r page labels."""
    table = [(1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
             (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")]
    out = []
    for value, glyphs in table:
        while n >= value:
            out.append(glyphs)
            n -= value
    return "".join(out)


def pdf_string(text: str) -> bytes:
    """Encode text as a PDF literal string in WinAnsi (cp1252), escaping \\ ( )."""
    raw = text.encode("cp1252")
    out = bytearray(b"(")
    for byte in raw:
        if byte in (0x5C, 0x28, 0x29):  # backslash, parentheses
            out += b"\\" + bytes([byte])
        elif 32 <= byte < 127:
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    out += b")"
    return bytes(out)


# ---------------------------------------------------------------------------
# Parsing the source text


@dataclass
class Block:
    kind: str  # "h1", "h2" or "p"
    text: str


H1_RE = re.compile(r"^\d+\.\s+\S.*$")
H2_RE = re.compile(r"^\d+\.\d+\s+\S.*$")


def parse_source(text: str) -> tuple[dict[str, str], list[Block]]:
    lines = text.replace("\r\n", "\n").split("\n")
    meta: dict[str, str] = {}
    i = 0
    while i < len(lines) and lines[i].strip():
        key, sep, value = lines[i].partition(":")
        if not sep:
            raise ValueError(f"line {i + 1}: expected 'Key: value' in the header")
        meta[key.strip().lower()] = value.strip()
        i += 1

    blocks: list[Block] = []
    chunk: list[str] = []

    def flush() -> None:
        if not chunk:
            return
        if len(chunk) == 1 and len(chunk[0]) < 70 and not chunk[0].endswith("."):
            line = chunk[0]
            if H2_RE.match(line):
                blocks.append(Block("h2", line))
            elif H1_RE.match(line):
                blocks.append(Block("h1", line))
            else:
                blocks.append(Block("p", line))
        else:
            blocks.append(Block("p", " ".join(part.strip() for part in chunk)))
        chunk.clear()

    for line in lines[i:]:
        if line.strip():
            chunk.append(line.strip())
        else:
            flush()
    flush()
    return meta, blocks


def wrap(text: str, size: float, width: float = COLUMN_W, limit: int = WRAP_CHARS) -> list[str]:
    """Greedy word wrap. Breaks only at spaces; never hyphenates or splits a word."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = word if not current else current + " " + word
        if current and (len(candidate) > limit or text_width(candidate, size) > width):
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


# ---------------------------------------------------------------------------
# Layout


@dataclass
class Page:
    ops: list[tuple[str, float, float, float, str]] = field(default_factory=list)
    label: str = ""


class BodyLayout:
    def __init__(self) -> None:
        self.pages: list[Page] = []
        self.toc: list[tuple[str, str, int]] = []  # (kind, heading, body page number)
        self.y = 0.0
        self.new_page()

    @property
    def top(self) -> float:
        return PAGE_H - MARGIN_TOP

    def new_page(self) -> None:
        self.pages.append(Page())
        self.y = self.top

    def at_top(self) -> bool:
        return self.y == self.top

    def room(self) -> float:
        # Space for baselines from the current y down to the bottom margin.
        return self.y - MARGIN_BOTTOM

    def put(self, font: str, size: float, text: str) -> None:
        self.pages[-1].ops.append((font, size, MARGIN_L, self.y, text))

    @staticmethod
    def paragraph_height(lines: list[str]) -> float:
        return (len(lines) - 1) * BODY_LEAD

    def add_paragraph(self, text: str) -> None:
        lines = wrap(text, BODY_SIZE)
        needed = self.paragraph_height(lines)
        if needed > self.top - MARGIN_BOTTOM:
            raise ValueError(f"paragraph too long for one page: {text[:60]!r}")
        if needed > self.room():
            self.new_page()
        for line in lines:
            self.put(FONT_REGULAR, BODY_SIZE, line)
            self.y -= BODY_LEAD
        self.y -= BODY_LEAD  # one blank line between paragraphs

    def add_heading(self, kind: str, text: str, following: Block | None) -> None:
        size, lead = (H1_SIZE, H1_LEAD) if kind == "h1" else (H2_SIZE, H2_LEAD)
        if kind == "h1" and not self.at_top():
            self.new_page()
        # Keep the heading together with the first lines of what follows.
        needed = lead
        if following is not None and following.kind == "p":
            needed += self.paragraph_height(wrap(following.text, BODY_SIZE))
        if needed > self.room() and not self.at_top():
            self.new_page()
        self.put(FONT_BOLD, size, text)
        self.toc.append((kind, text, len(self.pages)))
        self.y -= lead

    def run(self, blocks: list[Block]) -> None:
        for index, block in enumerate(blocks):
            following = blocks[index + 1] if index + 1 < len(blocks) else None
            if block.kind == "p":
                self.add_paragraph(block.text)
            else:
                self.add_heading(block.kind, block.text, following)


def centred(font: str, size: float, y: float, text: str) -> tuple[str, float, float, float, str]:
    x = (PAGE_W - text_width(text, size, bold=(font == FONT_BOLD))) / 2
    return (font, size, round(x, 2), y, text)


def title_page(meta: dict[str, str]) -> Page:
    page = Page()
    y = PAGE_H - 260
    if "subtitle" in meta:
        page.ops.append(centred(FONT_REGULAR, 14, y + 40, meta["subtitle"]))
    title = meta.get("title", "Untitled")
    for line in wrap(title, 24, width=COLUMN_W, limit=40):
        page.ops.append(centred(FONT_BOLD, 24, y, line))
        y -= 32
    y -= 20
    for key in ("edition", "owner"):
        if key in meta:
            page.ops.append(centred(FONT_REGULAR, 11, y, meta[key]))
            y -= 18
    return page


def contents_page(toc: list[tuple[str, str, int]]) -> Page:
    page = Page()
    y = PAGE_H - MARGIN_TOP
    page.ops.append((FONT_BOLD, H1_SIZE, MARGIN_L, y, "Contents"))
    y -= H1_LEAD + 8
    right = PAGE_W - MARGIN_R
    dot_w = text_width(".", BODY_SIZE)
    for kind, heading, number in toc:
        if kind == "h1":
            y -= 6
        font = FONT_BOLD if kind == "h1" else FONT_REGULAR
        indent = 0 if kind == "h1" else 18
        label = str(number)
        head_w = text_width(heading, BODY_SIZE, bold=(kind == "h1"))
        label_w = text_width(label, BODY_SIZE)
        x = MARGIN_L + indent
        page.ops.append((font, BODY_SIZE, x, y, heading))
        gap = right - label_w - (x + head_w) - 12
        if gap > 0:
            leader = "." * int(gap / dot_w)
            page.ops.append((FONT_REGULAR, BODY_SIZE, right - label_w - 6 - text_width(leader, BODY_SIZE), y, leader))
        page.ops.append((FONT_REGULAR, BODY_SIZE, right - label_w, y, label))
        y -= BODY_LEAD + 2
        if y < MARGIN_BOTTOM:
            raise ValueError("contents do not fit on one page")
    return page


# ---------------------------------------------------------------------------
# Writing the PDF


def content_stream(page: Page) -> bytes:
    parts = []
    for font, size, x, y, text in page.ops:
        parts.append(b"BT /%s %g Tf 1 0 0 1 %g %g Tm %s Tj ET" % (
            font.encode(), size, x, y, pdf_string(text)))
    footer = f"- {page.label} -"
    x = (PAGE_W - text_width(footer, FOOTER_SIZE)) / 2
    parts.append(b"BT /%s %g Tf 1 0 0 1 %g %g Tm %s Tj ET" % (
        FONT_REGULAR.encode(), FOOTER_SIZE, round(x, 2), FOOTER_Y, pdf_string(footer)))
    return b"\n".join(parts) + b"\n"


def build_pdf(pages: list[Page], meta: dict[str, str], compress: bool = True) -> bytes:
    # Fixed object numbers: 1 catalog, 2 page tree, 3-4 fonts, 5 info,
    # then a page object and a content stream object for each page.
    objects: dict[int, bytes] = {}
    first_page_obj = 6
    page_ids = [first_page_obj + 2 * i for i in range(len(pages))]

    objects[1] = (b"<< /Type /Catalog /Pages 2 0 R /PageMode /UseNone\n"
                  b"   /PageLabels << /Nums [0 << /S /r >> 2 << /S /D /St 1 >>] >> >>")
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages))
    objects[3] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    objects[4] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>"
    title = meta.get("title", "Untitled")
    author = meta.get("subtitle", "")
    objects[5] = (b"<< /Title %s /Author %s /Producer (make_pdf.py, Python standard library) "
                  b"/CreationDate (D:20240402090000Z) >>" % (pdf_string(title), pdf_string(author)))

    for page, pid in zip(pages, page_ids):
        data = content_stream(page)
        if compress:
            data = zlib.compress(data, 9)
            header = b"<< /Length %d /Filter /FlateDecode >>" % len(data)
        else:
            header = b"<< /Length %d >>" % len(data)
        objects[pid + 1] = header + b"\nstream\n" + data + b"\nendstream"
        objects[pid] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d]\n"
                        b"   /Resources << /Font << /F1 3 0 R /F2 4 0 R >> >>\n"
                        b"   /Contents %d 0 R >>" % (PAGE_W, PAGE_H, pid + 1))

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n"

    size = max(objects) + 1
    xref_at = len(out)
    out += b"xref\n0 %d\n" % size
    out += b"0000000000 65535 f \n"
    for number in range(1, size):
        out += b"%010d 00000 n \n" % offsets[number]
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 5 0 R >>\n" % size
    out += b"startxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def main(argv: list[str]) -> int:
    compress = "--no-compress" not in argv
    args = [a for a in argv if not a.startswith("--")]
    src = Path(args[0]) if args else DEFAULT_SRC
    out = Path(args[1]) if len(args) > 1 else DEFAULT_OUT

    meta, blocks = parse_source(src.read_text(encoding="utf-8"))
    body = BodyLayout()
    body.run(blocks)

    pages = [title_page(meta), contents_page(body.toc)] + body.pages
    for number, page in enumerate(pages):
        page.label = roman(number + 1) if number < 2 else str(number - 1)

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(build_pdf(pages, meta, compress=compress))
    print(f"wrote {out} ({len(pages)} pages: {', '.join(p.label for p in pages)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
