"""Hostile office files: each is refused by the loader with a reason naming its limit (or
what is wrong), before it costs what it asks for, and the ingest goes on with the others.
The packages are generated here (bot/testing/office_files.py), at sizes scaled to small
limits; benchmarks/hostile.py ingests full-size ones with the default limits.
"""

from __future__ import annotations

import struct
import zipfile

import pytest

from bot.testing import hostile
from bot.testing import office_files as of
from ingest.limits import Limits
from ingest.loaders import load
from ingest.pipeline import ingest
from search.embedded import EmbeddedStore
from search.errors import IngestError

DEFAULT = Limits()


def _refused(path, limits: Limits = DEFAULT) -> str:
    with pytest.raises(IngestError) as refused:
        load(path, path.name, limits)
    return str(refused.value)


def test_a_zip_bomb_is_refused_by_its_declared_size_before_inflating(tmp_path):
    bomb = of.zip_bomb(tmp_path / "bomb.docx", 20_000_000)
    assert bomb.stat().st_size < 100_000
    assert _refused(bomb, Limits(max_inflated_bytes=1_000_000)) == (
        "bomb.docx: word/document.xml inflates to 20,000,342 bytes (a zip bomb?), over the limit of "
        "1,000,000 (raise it with CITEBOT_INGEST_MAX_INFLATED_BYTES)")


def test_a_member_that_inflates_past_its_declared_size_is_cut_there_and_refused(tmp_path):
    # The directory and the local header both declare 1,000 bytes; the member inflates to 10 MB.
    bomb = of.zip_bomb(tmp_path / "liar.docx", 10_000_000)
    data = bytearray(bomb.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = -1
        while (at := data.find(signature, at + 1)) >= 0:
            name_at = at + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at:name_at + 17] == b"word/document.xml":
                struct.pack_into("<I", data, at + offset, 1_000)
    bomb.write_bytes(bytes(data))
    # zipfile stops at the declared size; the CRC of what it inflated then fails.
    assert _refused(bomb) == ("liar.docx: unreadable Word document (word/document.xml: Bad CRC-32 for file "
                              "'word/document.xml')")


def test_parts_each_under_the_member_limit_are_refused_by_the_files_budget(tmp_path):
    slides = [(of.shape(["Slide text " * 40_000], "body"), None) for _ in range(4)]  # 440 KB a slide
    deck = of.pptx(tmp_path / "deck.pptx", slides)
    limits = Limits(max_inflated_bytes=1_000_000, max_inflated_file_bytes=1_000_000)
    reason = _refused(deck, limits)
    assert reason.startswith("deck.pptx: PowerPoint presentation parts inflate to ")
    assert reason.endswith("bytes by ppt/slides/slide3.xml, over the limit of 1,000,000 (raise it with "
                           "CITEBOT_INGEST_MAX_INFLATED_FILE_BYTES)")
    assert len(load(deck, "deck.pptx", Limits(max_inflated_file_bytes=2_000_000)).sections) == 4


@pytest.mark.parametrize("fmt, part", [("docx", "word/document.xml"), ("odt", "content.xml")])
def test_an_entity_bomb_is_refused_at_its_doctype(tmp_path, fmt, part):
    bomb = of.entity_bomb(tmp_path / f"laughs.{fmt}", fmt)
    assert _refused(bomb) == (f"laughs.{fmt}: {part} has a DOCTYPE, which office suites never write "
                              "(its entities could expand without bound); refused")


@pytest.mark.parametrize("fmt", ["docx", "odt"])
def test_a_flood_of_empty_paragraphs_is_refused_by_the_element_limit(tmp_path, fmt):
    flood = of.empty_paragraphs(tmp_path / f"empty.{fmt}", 200_000, fmt)
    part = "word/document.xml" if fmt == "docx" else "content.xml"
    # Refused before the part is parsed: its start tags counted as it inflates.
    assert _refused(flood, Limits(max_xml_elements=100_000)) == (
        f"empty.{fmt}: XML of over 100,000 elements by {part} (start tags, counted before parsing), over the "
        "limit of 100,000 (raise it with CITEBOT_INGEST_MAX_XML_ELEMENTS)")
    doc = load(flood, flood.name, Limits(max_xml_elements=300_000))  # within the limit: read
    assert [p.text for s in doc.sections for p in s.paragraphs] == ["The last paragraph."]


def test_nesting_past_the_depth_limit_is_refused(tmp_path):
    deep = of.odt(tmp_path / "deep.odt", "<text:span>" * 600 + "x" + "</text:span>" * 600)
    assert _refused(deep, Limits(max_depth=500)) == (
        "deep.odt: content.xml nested 501 elements deep, over the limit of 500 (raise it with "
        "CITEBOT_INGEST_MAX_DEPTH)")


def test_a_zip_of_too_many_members_is_refused_from_its_end_record(tmp_path):
    crowded = of.many_members(tmp_path / "crowded.docx", 3_000)
    assert _refused(crowded, Limits(max_zip_members=1_000)) == (
        "crowded.docx: zip of 3,006 members, over the limit of 1,000 (raise it with "
        "CITEBOT_INGEST_MAX_ZIP_MEMBERS)")


def test_a_huge_paragraph_is_refused_by_the_character_limit_as_it_is_read(tmp_path):
    doc = of.docx(tmp_path / "long.docx", of.p("The rover docks. " * 20_000))
    assert _refused(doc, Limits(max_chars=100_000)) == (
        "long.docx: text of over 100,000 characters, over the limit of 100,000 (raise it with "
        "CITEBOT_INGEST_MAX_CHARS)")


def test_files_that_are_not_office_packages_say_what_they_are(tmp_path):
    (tmp_path / "legacy.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600)
    assert "an OLE2 file, not a Word document: password-protected" in _refused(tmp_path / "legacy.docx")
    (tmp_path / "notes.pptx").write_text("just text", encoding="utf-8")
    assert _refused(tmp_path / "notes.pptx") == "notes.pptx: not a PowerPoint presentation (no zip header)"
    with zipfile.ZipFile(tmp_path / "sheet.odt", "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
    assert _refused(tmp_path / "sheet.odt") == (
        "sheet.odt: not an OpenDocument text (its mimetype is 'application/vnd.oasis.opendocument.spreadsheet')")
    with zipfile.ZipFile(tmp_path / "empty.docx", "w") as z:
        z.writestr("hello.txt", "hi")
    assert _refused(tmp_path / "empty.docx") == (
        "empty.docx: no word/document.xml in the package: not a Word document, or a damaged one")
    broken = of.docx(tmp_path / "broken.docx", "<w:p><w:r><w:t>unclosed</w:r></w:p>")
    assert _refused(broken).startswith("broken.docx: word/document.xml is not well-formed XML (mismatched tag")
    with zipfile.ZipFile(tmp_path / "bz.odt", "w", zipfile.ZIP_BZIP2) as z:
        z.writestr("content.xml", "<a/>")
    assert _refused(tmp_path / "bz.odt") == (
        "bz.odt: content.xml is compressed by method 12, not deflate, which office suites write")


def test_hostile_office_files_are_skipped_with_reasons_and_the_good_one_is_ingested(tmp_path, test_embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    hostile.good_markdown(docs / "good.md")
    of.zip_bomb(docs / "bomb.docx", 5_000_000)
    of.entity_bomb(docs / "laughs.odt", "odt")
    of.empty_paragraphs(docs / "empty.odt", 50_000)
    store = EmbeddedStore(tmp_path / "s")
    summary = ingest([docs], store, test_embedder, progress=False,
                     limits=Limits(max_inflated_bytes=1_000_000, max_xml_elements=20_000))
    reasons = {s.source: s.reason for s in summary.skipped}
    assert set(reasons) == {"bomb.docx", "laughs.odt", "empty.odt"}
    assert "CITEBOT_INGEST_MAX_INFLATED_BYTES" in reasons["bomb.docx"]
    assert "has a DOCTYPE" in reasons["laughs.odt"]
    assert "CITEBOT_INGEST_MAX_XML_ELEMENTS" in reasons["empty.odt"]
    assert summary.documents == 1 and set(store.document_hashes()) == {"good.md"}


@pytest.mark.parametrize("name", ["rover-handbook.docx", "rover-handbook.odt", "rover-briefing.pptx"])
def test_damaged_packages_are_refused_with_a_reason_never_a_crash(name):
    # Bytes changed at random, and cut short: zipfile raises a dozen kinds of error on a
    # mangled header (a negative seek, an unknown version, a name not in its encoding).
    import random

    from ingest.loaders import parse
    from tests.test_office_files import FIXTURES

    base = (FIXTURES / name).read_bytes()
    rng = random.Random(name)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(300):
        data = bytearray(base)
        for _ in range(rng.choice([1, 2, 5, 20])):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.2:
            del data[rng.randrange(len(data)):]
        try:
            parse(bytes(data), name.rsplit(".", 1)[1], name)
            outcomes["read"] += 1
        except IngestError as exc:
            assert str(exc).startswith(f"{name}: ")
            outcomes["refused"] += 1
    assert outcomes["read"] and outcomes["refused"]
