"""Loaders: Markdown, HTML (a Confluence export's pages among them), plain text, CSV tables,
PDF and office files (.docx, .pptx, .odt) into sections of verbatim paragraphs.

Paragraph text is kept as the source has it (Markdown and text: the lines between
blank lines, byte for byte; HTML: the text as displayed, entities decoded and white
space collapsed as a browser does; PDF: the extracted lines of a paragraph joined by
single spaces; office files: a paragraph's text runs joined, white space collapsed).
Headings become the heading path, never paragraph text.

One module per format (markdown.py, which reads plain text too; html.py; pdf.py; docx.py,
pptx.py, odt.py on package.py's bounded zip and XML reading and flow.py's paragraphs and
table rows; confluence.py for a Confluence export's pages; table.py for CSV), what they
share in common.py, and the choice by extension in dispatch.py.
"""

from __future__ import annotations

from ingest.loaders.common import decode_text
from ingest.loaders.dispatch import FORMATS, load, parse
from ingest.loaders.docx import load_docx
from ingest.loaders.html import load_html
from ingest.loaders.markdown import front_matter_title, front_matter_url, load_markdown
from ingest.loaders.odt import load_odt
from ingest.loaders.pdf import load_pdf
from ingest.loaders.pptx import load_pptx

__all__ = [
    "FORMATS",
    "decode_text",
    "front_matter_title",
    "front_matter_url",
    "load",
    "load_docx",
    "load_html",
    "load_markdown",
    "load_odt",
    "load_pdf",
    "load_pptx",
    "parse",
]
