"""Office files written by Python (zipfile alone), for tests and benchmarks/hostile.py: the
loaders are tested on another writer than LibreOffice (tests/fixtures/office/), and on
hostile packages generated at run time (never committed).

- `docx`, `odt`, `pptx`: a minimal valid package around the body XML given;
- `p`, `h` (Word paragraphs), `odt_p`, `odt_h`, `slide`: small builders of that XML;
- `zip_bomb`: a package whose main part inflates to N bytes (blanks between elements);
- `entity_bomb`: a main part with a DOCTYPE declaring nested entities ("billion laughs");
- `empty_paragraphs`: a main part of N empty paragraphs (a few MB inflated per million);
- `many_members`: a package of N empty extra members.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
P = "http://schemas.openxmlformats.org/presentationml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'


def _rels(*rels: tuple[str, str, str]) -> str:
    return (
        f'{_XML}<Relationships xmlns="{RELS}">'
        + "".join(f'<Relationship Id="{i}" Type="{R}/{t}" Target="{target}"/>' for i, t, target in rels)
        + "</Relationships>"
    )


def _core(title: str | None) -> str:
    return (
        f'{_XML}<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/'
        f'core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        + (f"<dc:title>{escape(title)}</dc:title>" if title else "")
        + "</cp:coreProperties>"
    )


def _write(path: Path, members: dict[str, str | bytes], extra: int = 0) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data, zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED)
        for i in range(extra):
            z.writestr(f"extra/{i}.xml", b"")
    return path


# -- Word ----------------------------------------------------------------------------------
def p(text: str, style: str | None = None, outline_level: int | None = None, numbered: bool = False) -> str:
    """A Word paragraph of one run."""
    props = (
        (f'<w:pStyle w:val="{style}"/>' if style else "")
        + ('<w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>' if numbered else "")
        + (f'<w:outlineLvl w:val="{outline_level}"/>' if outline_level is not None else "")
    )
    return f'<w:p><w:pPr>{props}</w:pPr><w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'


def table(rows: list[list[str]]) -> str:
    return (
        "<w:tbl>"
        + "".join("<w:tr>" + "".join(f"<w:tc>{p(c)}</w:tc>" for c in row) + "</w:tr>" for row in rows)
        + "</w:tbl>"
    )


# Styles as Word names them: headings by name (with an outline level, as Word writes it),
# one by outline level alone, a style based on a heading, and a table-of-contents style.
WORD_STYLES = (
    f'{_XML}<w:styles xmlns:w="{W}">'
    '<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/>'
    '<w:pPr><w:outlineLvl w:val="0"/></w:pPr></w:style>'
    '<w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Chapter"><w:name w:val="Chapter"/>'
    '<w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>'
    '<w:style w:type="paragraph" w:styleId="Special"><w:name w:val="Special heading"/>'
    '<w:basedOn w:val="Heading1"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="TOC1"><w:name w:val="toc 1"/></w:style>'
    "</w:styles>"
)


def docx(
    path: Path,
    body: str,
    title: str | None = None,
    styles: str | None = WORD_STYLES,
    head: str = "",
    extra_members: int = 0,
) -> Path:
    """A .docx whose document part holds `body` (w:p, w:tbl…); `head` goes before its root."""
    members: dict[str, str | bytes] = {
        "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>',
        "_rels/.rels": _rels(
            ("rId1", "officeDocument", "word/document.xml"), ("rId2", "metadata/core-properties", "docProps/core.xml")
        ),
        "word/document.xml": f'{head or _XML}<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>',
        "docProps/core.xml": _core(title),
    }
    if styles:
        members["word/_rels/document.xml.rels"] = _rels(("rId1", "styles", "styles.xml"))
        members["word/styles.xml"] = styles
    return _write(path, members, extra_members)


# -- OpenDocument text -----------------------------------------------------------------------
def odt_p(text: str) -> str:
    return f"<text:p>{escape(text)}</text:p>"


def odt_h(text: str, level: int) -> str:
    return f'<text:h text:outline-level="{level}">{escape(text)}</text:h>'


def odt(path: Path, body: str, title: str | None = None, head: str = "") -> Path:
    """An .odt whose office:text holds `body`."""
    meta = (
        f'{_XML}<office:document-meta xmlns:office="{OFFICE}" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<office:meta>{f'<dc:title>{escape(title)}</dc:title>' if title else ''}</office:meta>"
        "</office:document-meta>"
    )
    return _write(
        path,
        {
            "mimetype": "application/vnd.oasis.opendocument.text",
            "META-INF/manifest.xml": '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"/>',
            "content.xml": (
                f'{head or _XML}<office:document-content xmlns:office="{OFFICE}" xmlns:text="{TEXT}" '
                f'xmlns:table="{TABLE}"><office:body><office:text>{body}</office:text></office:body>'
                "</office:document-content>"
            ),
            "meta.xml": meta,
        },
    )


# -- PowerPoint ------------------------------------------------------------------------------
def shape(paragraphs: list[str], placeholder: str | None = None, at: tuple[int, int] | None = None) -> str:
    """A text shape: its placeholder type ("title", "body", "sldNum"…) and offset (x, y)."""
    ph = "" if placeholder is None else f'<p:ph type="{placeholder}"/>'
    xfrm = f'<a:xfrm><a:off x="{at[0]}" y="{at[1]}"/><a:ext cx="100" cy="100"/></a:xfrm>' if at else ""
    paras = "".join(f"<a:p><a:r><a:t>{escape(t)}</a:t></a:r></a:p>" for t in paragraphs)
    return f"<p:sp><p:nvSpPr><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr>{xfrm}</p:spPr><p:txBody>{paras}</p:txBody></p:sp>"


def slide_table(rows: list[list[str]], at: tuple[int, int] | None = None) -> str:
    xfrm = f'<p:xfrm><a:off x="{at[0]}" y="{at[1]}"/></p:xfrm>' if at else ""
    cells = "".join(
        "<a:tr>"
        + "".join(f"<a:tc><a:txBody><a:p><a:r><a:t>{escape(c)}</a:t></a:r></a:p></a:txBody></a:tc>" for c in row)
        + "</a:tr>"
        for row in rows
    )
    return f"<p:graphicFrame>{xfrm}<a:graphic><a:graphicData><a:tbl>{cells}</a:tbl></a:graphicData></a:graphic></p:graphicFrame>"


def _tree(root: str, shapes: str) -> str:
    return (
        f'{_XML}<p:{root} xmlns:p="{P}" xmlns:a="{A}" xmlns:r="{R}"><p:cSld><p:spTree>'
        f"<p:grpSpPr/>{shapes}</p:spTree></p:cSld></p:{root}>"
    )


def pptx(
    path: Path, slides: list[tuple[str, str | None]], title: str | None = None, order: list[int] | None = None
) -> Path:
    """A .pptx of slides (its shapes' XML, its notes' text or None), shown in `order` (indexes
    into slides; file order by default)."""
    members: dict[str, str | bytes] = {
        "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>',
        "_rels/.rels": _rels(
            ("rId1", "officeDocument", "ppt/presentation.xml"),
            ("rId2", "metadata/core-properties", "docProps/core.xml"),
        ),
        "docProps/core.xml": _core(title),
    }
    rels = []
    for i, (shapes, notes) in enumerate(slides, start=1):
        rels.append((f"rId{i}", "slide", f"slides/slide{i}.xml"))
        members[f"ppt/slides/slide{i}.xml"] = _tree("sld", shapes)
        if notes is not None:
            members[f"ppt/slides/_rels/slide{i}.xml.rels"] = _rels(
                ("rId1", "notesSlide", f"../notesSlides/notesSlide{i}.xml")
            )
            members[f"ppt/notesSlides/notesSlide{i}.xml"] = _tree(
                "notes", shape([], "sldImg") + shape([notes], "body") + shape(["7"], "sldNum")
            )
    ids = "".join(f'<p:sldId id="{256 + i}" r:id="rId{i + 1}"/>' for i in (order or range(len(slides))))
    members["ppt/presentation.xml"] = (
        f'{_XML}<p:presentation xmlns:p="{P}" xmlns:r="{R}"><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>'
    )
    members["ppt/_rels/presentation.xml.rels"] = _rels(*rels)
    return _write(path, members)


# -- hostile packages ------------------------------------------------------------------------
def zip_bomb(path: Path, inflated_bytes: int) -> Path:
    """A .docx whose document part inflates to about `inflated_bytes`: blanks between two
    paragraphs, deflated about 1,000 to 1 (streamed: a few MB of memory to write)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("_rels/.rels", _rels(("rId1", "officeDocument", "word/document.xml")))
        with z.open("word/document.xml", "w", force_zip64=inflated_bytes > 2_000_000_000) as out:
            out.write(f'{_XML}<w:document xmlns:w="{W}"><w:body>{p("Before the blanks.")}'.encode())
            block = b" " * (1 << 20)
            left = inflated_bytes
            while left > 0:
                out.write(block[:left])
                left -= len(block)
            out.write(f"{p('After the blanks.')}</w:body></w:document>".encode())
    return path


def entity_bomb(path: Path, fmt: str = "docx") -> Path:
    """The billion laughs: ten entities each of ten of the one before (10^9 'lol's expanded)."""
    decls = '<!ENTITY lol0 "lol">' + "".join(
        f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10)
    )
    root = "w:document" if fmt == "docx" else "office:document-content"
    head = f'<?xml version="1.0"?>\n<!DOCTYPE {root} [{decls}]>'
    if fmt == "docx":
        return docx(path, p("&lol9;").replace("&amp;lol9;", "&lol9;"), head=head)
    return odt(path, odt_p("&lol9;").replace("&amp;lol9;", "&lol9;"), head=head)


def empty_paragraphs(path: Path, count: int, fmt: str = "odt") -> Path:
    """A main part of `count` empty paragraphs, then one with text."""
    if fmt == "odt":
        return odt(path, "<text:p/>" * count + odt_p("The last paragraph."))
    return docx(path, "<w:p/>" * count + p("The last paragraph."))


def many_members(path: Path, count: int) -> Path:
    """A valid .docx with `count` empty members beside its parts."""
    return docx(path, p("A document among many members."), extra_members=count)
