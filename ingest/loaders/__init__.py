"""Loaders: Markdown, HTML, plain text and PDF into sections of verbatim paragraphs.

Paragraph text is kept as the source has it (Markdown and text: the lines between
blank lines, byte for byte; HTML: the text as displayed, entities decoded and white
space collapsed as a browser does; PDF: the extracted lines of a paragraph joined by
single spaces). Headings become the heading path, never paragraph text.

One module per format (markdown.py, which reads plain text too; html.py; pdf.py), what
they share in common.py, and the choice by extension in dispatch.py.
"""

from __future__ import annotations

from ingest.loaders.common import decode_text
from ingest.loaders.dispatch import FORMATS, load, parse
from ingest.loaders.html import load_html
from ingest.loaders.markdown import front_matter_url, load_markdown
from ingest.loaders.pdf import load_pdf

__all__ = ["FORMATS", "decode_text", "front_matter_url", "load", "load_html", "load_markdown",
           "load_pdf", "parse"]
