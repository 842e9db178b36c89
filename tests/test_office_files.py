"""Office files (.docx, .pptx, .odt): their structure as the chunker reads it (headings,
lists, tables, notes, title), from two writers: LibreOffice (tests/fixtures/office/, its
README says how each was made) and Python (bot/testing/office_files.py, zipfile alone).
The hostile packages are in tests/test_office_hostile.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from bot.cli import cli
from bot.testing import office_files as of
from ingest.loaders import FORMATS, load

FIXTURES = Path(__file__).parent / "fixtures" / "office"

# The structure of tests/fixtures/office/rover-handbook.html, as the HTML loader reads it.
HANDBOOK = [
    (("Charging",), [("Every rover docks at the charging bay before its first shift and reports its battery "
                      "level to the fleet service.")]),
    (("Charging", "Battery checks"), [
        "A battery below forty percent is swapped by the night crew, never by the driver.",
        "Check the connector for corrosion.", "Log the cycle count in the maintenance sheet.",
        "Cycles above nine hundred go to the workshop."]),
    (("Charging", "Battery checks", "Spare packs"), ["Spare packs are kept in the cold store on shelf B."]),
    (("Routes",), ["Plan the route in the dispatcher.", "Confirm the weather window with the harbour master.",
                   "Route | Length | Rover", "Quay loop | 4 km | Kestrel", "Dune track | 11 km | Osprey",
                   "The dune track closes when the wind passes sixty kilometres an hour."]),
]


def _structure(doc) -> list[tuple[tuple[str, ...], list[str]]]:
    return [(s.heading_path, [p.text for p in s.paragraphs]) for s in doc.sections]


def test_the_office_suffixes_are_dispatched():
    assert {FORMATS[s] for s in (".docx", ".pptx", ".odt")} == {"docx", "pptx", "odt"}


def test_libreoffice_docx_and_odt_read_as_the_html_they_were_made_from():
    html = load(FIXTURES / "rover-handbook.html", "rover-handbook.html")
    assert _structure(html) == HANDBOOK
    for name, fmt in (("rover-handbook.docx", "docx"), ("rover-handbook.odt", "odt")):
        doc = load(FIXTURES / name, name)
        assert (doc.format, doc.title) == (fmt, "Rover fleet handbook")
        assert _structure(doc) == HANDBOOK, name


def test_libreoffice_pptx_slides_are_sections_in_reading_order_with_their_notes():
    doc = load(FIXTURES / "rover-briefing.pptx", "rover-briefing.pptx")
    assert (doc.format, doc.title) == ("pptx", "Rover fleet briefing")
    assert _structure(doc) == [
        (("Morning shift",), ["Kestrel takes the quay loop at six.", "Osprey waits for the tide.",
                              "The tide table is pinned in the dispatch room.",
                              "Remind the drivers that the quay gate opens at a quarter to six."]),
        # The table sits above the text box on the slide, though the file has the box first.
        (("Route lengths",), ["Quay loop | 4 km", "Dune track | 11 km",
                              "Lengths are measured from the charging bay door.",
                              "The dune track figure includes the detour around the lifeguard hut."]),
    ]


def test_docx_headings_by_style_name_outline_level_and_base_style(tmp_path):
    body = (of.p("Fleet manual", "Title") + of.p("Intro text.")
            + of.p("Contents", "TOC1") + of.p("Docking", "Heading1") + of.p("Dock text.")
            + of.p("Bays", "Heading2") + of.p("Bay text.", numbered=True)
            + of.p("By level", "Chapter") + of.p("Chapter text.")
            + of.p("Direct", outline_level=2) + of.p("Direct text.")
            + of.p("Not a heading", "Heading1", outline_level=9) + of.p("Special", "Special")
            + of.p("Special text."))
    doc = load(of.docx(tmp_path / "a.docx", body, title="Rover manual"), "a.docx")
    assert doc.title == "Rover manual"
    assert _structure(doc) == [
        (("Fleet manual",), ["Intro text."]),  # Title style: a heading; a TOC entry left out
        (("Docking",), ["Dock text."]),
        (("Docking", "Bays"), ["Bay text."]),  # a list item is a paragraph
        (("Docking", "By level"), ["Chapter text."]),  # the style's outline level 1: level 2
        (("Docking", "By level", "Direct"), ["Direct text.", "Not a heading"]),  # own level 9: body
        (("Special",), ["Special text."]),  # based on Heading1: inherits its level
    ]


def test_docx_title_falls_back_to_the_title_style_then_the_first_heading(tmp_path):
    doc = load(of.docx(tmp_path / "t.docx", of.p("Ops guide", "Title") + of.p("Text.")), "t.docx")
    assert doc.title == "Ops guide"
    doc = load(of.docx(tmp_path / "h.docx", of.p("Docking", "Heading1") + of.p("Text."), styles=None), "h.docx")
    # Without styles.xml a style names nothing: no heading, the file's name is the title.
    assert (doc.title, _structure(doc)) == ("h", [((), ["Docking", "Text."])])


def test_docx_leaves_out_deleted_text_field_codes_fallbacks_and_a_toc_control(tmp_path):
    body = (
        '<w:sdt><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Table of Contents"/></w:docPartObj></w:sdtPr>'
        f"<w:sdtContent>{of.p('Docking ..... 3')}</w:sdtContent></w:sdt>"
        '<w:p><w:r><w:t>Kept</w:t></w:r><w:del><w:r><w:delText>deleted</w:delText></w:r></w:del>'
        '<w:r><w:instrText> PAGE </w:instrText></w:r><w:r><w:tab/><w:t>after a tab</w:t></w:r>'
        '<w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
        f"<mc:Choice><w:txbxContent>{of.p('In a text box.')}</w:txbxContent></mc:Choice>"
        f"<mc:Fallback><w:txbxContent>{of.p('In a text box.')}</w:txbxContent></mc:Fallback>"
        "</mc:AlternateContent></w:r></w:p>")
    doc = load(of.docx(tmp_path / "d.docx", body), "d.docx")
    assert _structure(doc) == [((), ["In a text box.", "Kept after a tab"])]


def test_docx_table_rows_are_paragraphs_and_a_nested_table_is_its_cells_text(tmp_path):
    inner = of.table([["bay 1", "free"], ["bay 2", "taken"]])
    body = (f"<w:tbl><w:tr><w:tc>{of.p('Dock')}</w:tc><w:tc>{of.p('State')}</w:tc></w:tr>"
            f"<w:tr><w:tc>{of.p('North')}</w:tc><w:tc>{inner}</w:tc></w:tr></w:tbl>")
    doc = load(of.docx(tmp_path / "t.docx", body), "t.docx")
    assert _structure(doc) == [((), ["Dock | State", "North | bay 1 | free bay 2 | taken"])]


def test_odt_headings_lists_tables_notes_and_title(tmp_path):
    body = (
        of.odt_h("Charging", 1) + of.odt_p("Dock first.")
        + "<text:list><text:list-item>" + of.odt_p("Check the plug.") + "<text:list><text:list-item>"
        + of.odt_p("Twice in winter.") + "</text:list-item></text:list></text:list-item></text:list>"
        + of.odt_h("Bays", 3) + '<text:p>Bay <text:span>B</text:span><text:s text:c="4"/>is cold'
        '<text:note><text:note-citation>1</text:note-citation><text:note-body>'
        + of.odt_p("Below five degrees.") + "</text:note-body></text:note>.</text:p>"
        + '<text:tracked-changes><text:changed-region><text:deletion>' + of.odt_p("Gone.")
        + "</text:deletion></text:changed-region></text:tracked-changes>"
        + '<text:table-of-content><text:index-body>' + of.odt_p("Charging 1") + "</text:index-body>"
        "</text:table-of-content>"
        + "<table:table><table:table-row><table:table-cell>" + of.odt_p("Bay") + "</table:table-cell>"
        "<table:table-cell>" + of.odt_p("B") + "</table:table-cell></table:table-row></table:table>"
        + of.odt_h("No level", 0) + "<text:h>Plain</text:h>" + of.odt_p("Last."))
    doc = load(of.odt(tmp_path / "c.odt", body, title="Charging notes"), "c.odt")
    assert doc.title == "Charging notes"
    assert _structure(doc) == [
        (("Charging",), ["Dock first.", "Check the plug.", "Twice in winter."]),
        # A note's paragraph is a paragraph of its own, before the one that cites it.
        (("Charging", "Bays"), ["Below five degrees.", "Bay B is cold.", "Bay | B"]),
        (("Plain",), ["Last."]),  # outline level 0 reads as 1; so does a heading without one
    ]


def test_pptx_slides_in_presentation_order_titles_positions_notes_and_furniture(tmp_path):
    top, low = (100, 100), (100, 5_000)
    slides = [
        (of.shape(["Docking"], "title", (0, 0)) + of.shape(["Below the table."], None, low)
         + of.slide_table([["Bay", "Rover"], ["B", "Kestrel"]], top) + of.shape(["3"], "sldNum", (9, 9)),
         "Say the bay number twice."),
        (of.shape(["Second in the file, shown first."], "body", top), None),
        (of.shape(["Routes"], "title") + of.shape(["First in the file."], "body", low)
         + of.shape(["Has no offset."], "body"), "Routes change in winter."),
    ]
    doc = load(of.pptx(tmp_path / "d.pptx", slides, order=[1, 0, 2]), "d.pptx")
    assert doc.title == "Docking"  # no core title: the first slide title
    assert _structure(doc) == [
        (("Slide 1",), ["Second in the file, shown first."]),  # untitled: numbered as shown
        (("Docking",), ["Bay | Rover", "B | Kestrel", "Below the table.", "Say the bay number twice."]),
        # A shape without an offset: file order for the slide.
        (("Routes",), ["First in the file.", "Has no offset.", "Routes change in winter."]),
    ]


def test_citebot_ingest_and_search_find_a_passage_of_each_format(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("rover-handbook.docx", "rover-briefing.pptx"):
        (docs / name).write_bytes((FIXTURES / name).read_bytes())
    of.odt(docs / "harbour.odt", of.odt_h("Harbour", 1) + of.odt_p(
        "The harbour master signs the tide log for every rover that crosses the slipway."), title="Harbour")
    monkeypatch.setenv("CITEBOT_STORE", str(tmp_path / "store"))
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(docs), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.splitlines()[-1])
    assert (out["documents"], out["skipped"]) == (3, [])
    for query, source, words in (
        ("who swaps a battery below forty percent", "rover-handbook.docx", "night crew"),
        ("when does the quay gate open", "rover-briefing.pptx", "quarter to six"),
        ("who signs the tide log at the slipway", "harbour.odt", "harbour master signs"),
    ):
        result = runner.invoke(cli, ["search", query, "--json"])
        assert result.exit_code == 0, result.output
        hits = json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])["hits"]
        assert hits[0]["source"] == source and words in hits[0]["text"], (query, hits[:2])
