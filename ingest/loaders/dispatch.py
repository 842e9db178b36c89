"""Which loader reads a file: its format by extension (FORMATS; an HTML page exported by
Confluence by its markup), then the checks every file passes (not empty, some text found,
under the character limit).
"""

from __future__ import annotations

from pathlib import Path

from ingest.document import LoadedDocument
from ingest.limits import DEFAULT_LIMITS, Limits, over, read_file
from ingest.loaders.common import decode_text
from ingest.loaders.confluence import is_confluence_page, load_confluence
from ingest.loaders.docx import load_docx
from ingest.loaders.html import load_html
from ingest.loaders.markdown import load_markdown
from ingest.loaders.odt import load_odt
from ingest.loaders.pdf import load_pdf
from ingest.loaders.pptx import load_pptx
from ingest.loaders.table import load_csv
from search.errors import IngestError

FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".odt": "odt",
    ".csv": "csv",
}
# The office formats: zip packages of XML (ingest/loaders/package.py).
_OFFICE = {"docx": load_docx, "pptx": load_pptx, "odt": load_odt}


def load(path: Path, source: str, limits: Limits = DEFAULT_LIMITS) -> LoadedDocument:
    """Load one file by its extension; IngestError says why a file cannot be used."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise IngestError(f"{source}: unsupported format {path.suffix or '(no extension)'!r}")
    data, _stamp = read_file(path, source, limits)
    return parse(data, fmt, source, limits)


def parse(data: bytes, fmt: str, source: str, limits: Limits = DEFAULT_LIMITS) -> LoadedDocument:
    """A file's bytes, read once (ingest.limits.read_file), as a document of format `fmt`."""
    if not data.strip():
        raise IngestError(f"{source}: empty file")
    if fmt == "pdf":
        if not data.startswith(b"%PDF"):
            raise IngestError(f"{source}: not a PDF (no %PDF header)")
        doc = load_pdf(data, source, limits)
    elif fmt in _OFFICE:
        doc = _OFFICE[fmt](data, source, limits)
    else:
        text = decode_text(data, source)
        if fmt == "markdown":
            doc = load_markdown(text, source)
        elif fmt == "text":
            doc = load_markdown(text, source, atx=False, fmt="text")
        elif fmt == "csv":
            doc = load_csv(text, source, limits)
        elif is_confluence_page(text):
            doc = load_confluence(text, source, limits)
        else:
            doc = load_html(text, source, limits)
    if not doc.sections:
        raise IngestError(f"{source}: no text found")
    chars = sum(len(p.text) for s in doc.sections for p in s.paragraphs)
    if chars > limits.max_chars:
        raise over(f"{source}: text of", f"{chars:,} characters", limits.max_chars, "CITEBOT_INGEST_MAX_CHARS")
    return doc
