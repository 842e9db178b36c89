"""PDF files into sections: each page's extracted lines joined into paragraphs by single
spaces, with the printed page label; numbered lines become headings, and page numbers and
table-of-contents lines are left out. The per-file inflation budget is pdf_budget.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from ingest.document import LoadedDocument
from ingest.limits import DEFAULT_LIMITS, Limits, over
from ingest.loaders.common import Outline
from ingest.loaders.pdf_budget import charge_pages
from search.errors import IngestError

# A numbered heading line in a PDF: "2. Protective Equipment", "2.1 Safety Boots".
_PDF_HEADING = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+([A-Z][^.!?]{1,80})$")


def _is_dot_leader(line: str) -> bool:
    """A table-of-contents line: a run of six or more dots, then its last word ("Intro ...... 5").

    By str methods: the regex it replaces (`\\.{6,}\\s*\\S+$`, searched) backtracked through
    the dots at every start, cubic in a line of dots (2,000 dots: 27 s).
    """
    if not line or line[-1].isspace():
        return False
    parts = line.rsplit(None, 1)
    return "......" in parts[-1][:-1] or (len(parts) == 2 and parts[0].endswith("......"))


_PAGE_NUMBER_PADDING = "-–—"


def _is_page_number(line: str, label: str) -> bool:
    """The line is the page's label between dashes and blanks (the printed page number).

    By str methods: `[-–—\\s]*LABEL[-–—\\s]*` as a regex was quadratic in a run of dashes
    when the label itself begins with one.
    """

    def padding(c: str) -> bool:
        return c in _PAGE_NUMBER_PADDING or c.isspace()

    head = 0
    while head < len(line) and padding(line[head]):
        head += 1
    if head == len(line):  # all padding: so must the label be
        return label in line and all(padding(c) for c in label)
    tail = len(line)
    while padding(line[tail - 1]):
        tail -= 1
    # The label starts within the leading padding and ends within the trailing padding:
    # at most min(head, len(label)) + 1 places to compare.
    return any(line.startswith(label, i) for i in range(max(0, tail - len(label)), head + 1) if i + len(label) >= tail)


def load_pdf(data: bytes, source: str, limits: Limits = DEFAULT_LIMITS) -> LoadedDocument:
    """PDF pages with their printed page labels; numbered lines become headings."""
    import io

    from pypdf import PdfReader, apply_configuration
    from pypdf.errors import LimitReachedError, PyPdfError

    inflated = limits.max_inflated_bytes
    try:
        # A stream that inflates past the limit (a decompression bomb) stops pypdf there.
        with apply_configuration(
            zlib_maximum_output_length=inflated,
            lzw_maximum_output_length=inflated,
            run_length_maximum_output_length=inflated,
            jbig2_maximum_output_length=inflated,
            brotli_maximum_output_length=inflated,
            array_based_stream_maximum_output_length=inflated,
        ):
            reader = PdfReader(io.BytesIO(data))
            if len(reader.pages) > limits.max_pages:
                raise over(
                    f"{source}: PDF of", f"{len(reader.pages):,} pages", limits.max_pages, "CITEBOT_INGEST_MAX_PAGES"
                )
            charge_pages(reader.pages, source, limits)  # the per-file budget, before any parsing
            labels = list(reader.page_labels)
            texts: list[tuple[str, str]] = []
            chars = 0
            for i, page in enumerate(reader.pages):
                text = page.extract_text(extraction_mode="layout") or ""
                chars += len(text)
                if chars > limits.max_chars:
                    raise over(
                        f"{source}: PDF text of",
                        f"over {chars:,} characters by page {i + 1}",
                        limits.max_chars,
                        "CITEBOT_INGEST_MAX_CHARS",
                    )
                texts.append((labels[i] if i < len(labels) else str(i + 1), text))
    except LimitReachedError as exc:
        raise IngestError(
            f"{source}: PDF stream inflates past {inflated:,} bytes, a decompression "
            f"bomb or a huge image (raise the limit with CITEBOT_INGEST_MAX_INFLATED_BYTES; "
            f"pypdf: {exc})"
        ) from exc
    except (PyPdfError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise IngestError(f"{source}: unreadable PDF ({exc})") from exc
    outline = Outline()
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
            if _is_page_number(line, label):
                continue  # the printed page number in the footer
            if _is_dot_leader(line):
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
