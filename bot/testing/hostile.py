"""Hostile files, generated at run time for tests and benchmarks (never committed).

Each writer streams its file to disk, so a 200 MB text or a PDF stream that inflates to
gigabytes costs the generator only a few MB of memory:

- `big_text`: plain text of a given size, paragraphs of ordinary words;
- `many_pages_pdf`: a valid PDF (written with pypdf) of N pages, one line of text each;
- `deep_html`: elements nested N deep around one paragraph;
- `pdf_bomb`: a one-page PDF whose content stream (FlateDecode) inflates to N bytes;
- `pdf_pages_bomb`: a PDF of N pages, each content stream inflating to M bytes;
- `invalid_utf8`: a text file with a byte that is not UTF-8 in its middle;
- `good_markdown`: an ordinary page, to show the other files are still ingested.
"""

from __future__ import annotations

import zlib
from pathlib import Path

_WORDS = (
    "the rover docks at the charging bay before each shift and reports its battery "
    "level to the fleet service which schedules the next route"
).split()


def good_markdown(path: Path, topic: str = "Charging bay") -> Path:
    path.write_text(f"# {topic}\n\nEvery rover docks at the {topic.lower()} before its shift.\n", encoding="utf-8")
    return path


def big_text(path: Path, size_bytes: int) -> Path:
    """Plain text of exactly `size_bytes` bytes: paragraphs of 60 words, blank lines between."""
    paragraph = (" ".join(_WORDS[i % len(_WORDS)] for i in range(60)) + "\n\n").encode()
    block = paragraph * max(1, (1 << 20) // len(paragraph))
    with path.open("wb") as out:
        left = size_bytes
        while left > 0:
            piece = block[:left]
            out.write(piece)
            left -= len(piece)
    return path


def deep_html(path: Path, depth: int, tag: str = "div") -> Path:
    """One paragraph inside `depth` nested elements, every one closed."""
    path.write_text(
        "<html><body>"
        + f"<{tag}>" * depth
        + "<p>Deep down, the rover docks.</p>"
        + f"</{tag}>" * depth
        + "</body></html>",
        encoding="utf-8",
    )
    return path


def invalid_utf8(path: Path) -> Path:
    path.write_bytes(b"# Notes\n\nThe rover docks at the bay.\n\nCaf\xe9 opens at nine.\n")
    return path


def _pdf_page_text(writer, text_for_page, pages: int) -> None:
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    font = writer._add_object(
        DictionaryObject(
            {  # one font object shared by every page
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    resources = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    for n in range(pages):
        page = writer.add_blank_page(width=612, height=792)
        content = DecodedStreamObject()
        content.set_data(text_for_page(n))
        page[NameObject("/Contents")] = writer._add_object(content)
        page[NameObject("/Resources")] = resources


def many_pages_pdf(path: Path, pages: int) -> Path:
    """A PDF of `pages` pages, each with one line of text naming its page."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    _pdf_page_text(
        writer,
        lambda n: f"BT /F1 12 Tf 72 720 Td (Page {n + 1}: the rover docks at bay {n % 50}.) Tj ET".encode(),
        pages,
    )
    with path.open("wb") as out:
        writer.write(out)
    return path


def pdf_bomb(path: Path, inflated_bytes: int) -> Path:
    """A one-page PDF whose FlateDecode content stream inflates to `inflated_bytes` (spaces).

    Written by hand (pypdf would inflate the stream to write it): the compressed stream is
    about inflated_bytes / 1000 bytes, since zlib compresses a run of one byte ~1000:1.
    """
    compressor = zlib.compressobj(9)
    chunk = b" " * (1 << 20)
    parts = [compressor.compress(b"BT /F1 12 Tf 72 720 Td (Boom) Tj ET\n")]
    left = inflated_bytes
    while left > 0:
        parts.append(compressor.compress(chunk[: min(left, len(chunk))]))
        left -= len(chunk)
    parts.append(compressor.flush())
    stream = b"".join(parts)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>"
        ),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def pdf_pages_bomb(path: Path, pages: int, inflated_per_page: int) -> Path:
    """A PDF of `pages` pages, each a FlateDecode content stream inflating to
    `inflated_per_page` bytes (one line of text, then spaces): every stream can stay under
    the per-stream limit while the file as a whole inflates to pages x that."""
    compressor = zlib.compressobj(9)
    chunk = b" " * (1 << 20)
    parts = [compressor.compress(b"BT /F1 12 Tf 72 720 Td (Boom) Tj ET\n")]
    left = inflated_per_page - len(b"BT /F1 12 Tf 72 720 Td (Boom) Tj ET\n")
    while left > 0:
        parts.append(compressor.compress(chunk[: min(left, len(chunk))]))
        left -= len(chunk)
    parts.append(compressor.flush())
    stream = b"".join(parts)  # the same bytes in one stream object per page
    kids = b" ".join(b"%d 0 R" % (4 + 2 * n) for n in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for n in range(pages):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % (5 + 2 * n)
        )
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path
