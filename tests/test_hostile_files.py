"""Hostile files at ingest: each is skipped with a reason naming its limit, the others are ingested.

The files are generated here (bot/testing/hostile.py), at sizes scaled to small limits so
the tests stay fast; benchmarks/hostile.py ingests the full-size ones (a 200 MB text, a
5,000-page PDF, a PDF stream that inflates to 2 GB) with the default limits and reports
peak memory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.testing import hostile
from ingest.limits import DEFAULT_LIMITS, Limits
from ingest.loaders import load, load_html
from ingest.pipeline import ingest
from search.embedded import EmbeddedStore
from search.errors import IngestError

SMALL = Limits(max_bytes=1_000_000, max_pages=50, max_chars=200_000, max_depth=1_000,
               max_inflated_bytes=1_000_000)


def _folder(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    hostile.good_markdown(docs / "good.md")
    hostile.big_text(docs / "big.txt", 2_000_000)
    hostile.many_pages_pdf(docs / "pages.pdf", 60)
    hostile.deep_html(docs / "deep.html", 10_000)
    hostile.pdf_bomb(docs / "bomb.pdf", 50_000_000)
    hostile.invalid_utf8(docs / "latin1.md")
    (docs / "long.md").write_text("# Long\n\n" + "The rover docks at the bay. " * 10_000, encoding="utf-8")
    os.mkfifo(docs / "pipe.txt")  # reading it would block for ever
    return docs


def test_every_hostile_file_is_skipped_with_its_reason_and_the_good_one_is_ingested(tmp_path, test_embedder):
    docs = _folder(tmp_path)
    store = EmbeddedStore(tmp_path / "s")
    summary = ingest([docs], store, test_embedder, progress=False, limits=SMALL)
    reasons = {s.source: s.reason for s in summary.skipped}
    assert reasons == {
        "big.txt": "file of 2,000,000 bytes, over the limit of 1,000,000 (raise it with CITEBOT_INGEST_MAX_BYTES)",
        "pages.pdf": "PDF of 60 pages, over the limit of 50 (raise it with CITEBOT_INGEST_MAX_PAGES)",
        "deep.html": "HTML nested 1,001 elements deep, over the limit of 1,000 (raise it with CITEBOT_INGEST_MAX_DEPTH)",
        "bomb.pdf": reasons["bomb.pdf"],
        "latin1.md": "not UTF-8 (invalid continuation byte at byte 41); convert it, e.g. iconv -f latin1 -t utf-8",
        "long.md": "text of 280,000 characters, over the limit of 200,000 (raise it with CITEBOT_INGEST_MAX_CHARS)",
        "pipe.txt": "not a regular file (a FIFO, socket or device); left out",
    }
    assert reasons["bomb.pdf"].startswith("PDF stream inflates past 1,000,000 bytes, a decompression bomb")
    assert "CITEBOT_INGEST_MAX_INFLATED_BYTES" in reasons["bomb.pdf"]
    assert summary.documents == 1 and set(store.document_hashes()) == {"good.md"}
    assert summary.as_json()["skipped"] == [{"source": s.source, "reason": s.reason} for s in summary.skipped]


def test_the_default_limits_let_ordinary_large_files_through(tmp_path, test_embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    hostile.many_pages_pdf(docs / "manual.pdf", 300)  # longer than the longest real manual here
    hostile.deep_html(docs / "nested.html", 200)  # 3x the deepest real page
    store = EmbeddedStore(tmp_path / "s")
    summary = ingest([docs], store, test_embedder, progress=False, limits=DEFAULT_LIMITS)
    assert summary.skipped == [] and summary.documents == 2
    pages = {c.page for c in store.iter_chunks() if c.source == "manual.pdf"}
    assert any(p.startswith("1") for p in pages) and any(p.endswith("300") for p in pages)


def test_a_file_saved_while_it_is_ingested_keeps_the_stored_version(tmp_path, test_embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "policy.md"
    page.write_text("# Policy\n\nRovers dock every night.\n", encoding="utf-8")
    store = EmbeddedStore(tmp_path / "s")
    assert ingest([docs], store, test_embedder, progress=False).documents == 1

    class SavesWhileEmbedding:
        """The test embedder, but someone saves the page again while its chunks are embedded."""

        def __getattr__(self, name):
            return getattr(test_embedder, name)

        def encode_jobs(self, jobs):  # the model call of an ingest's pool of windows
            page.write_text("# Policy\n\nRovers dock twice a night, from March.\n", encoding="utf-8")
            return test_embedder.encode_jobs(jobs)

    page.write_text("# Policy\n\nRovers dock every other night.\n", encoding="utf-8")
    summary = ingest([docs], store, SavesWhileEmbedding(), progress=False)
    assert [(s.source, s.reason) for s in summary.skipped] == [(
        "policy.md", "changed while it was being ingested; the stored version, if any, is kept: "
                     "ingest again once it is saved")]
    assert summary.documents == 0 and summary.deleted == 0
    assert [c.text for c in store.iter_chunks()] == ["Rovers dock every night."]
    # Once the file is still, the next run takes the saved version.
    assert ingest([docs], store, test_embedder, progress=False).documents == 1
    assert [c.text for c in store.iter_chunks()] == ["Rovers dock twice a night, from March."]


def test_stray_end_tags_and_deep_list_items_cost_linear_time():
    """Regressions: "</span>" with no open span and "<li>" under a deep stack each scanned
    the whole stack (quadratic); the page must still parse to its one paragraph."""
    doc = load_html("<div>" * 900 + "<p>The rover docks.</p>" + "</span>" * 50_000, "stray.html")
    assert [p.text for s in doc.sections for p in s.paragraphs] == ["The rover docks."]
    doc = load_html("<ul><li><div>" + "<span>" * 900 + "<li>Dock.</li>" * 3_000, "items.html")
    assert sum(len(s.paragraphs) for s in doc.sections) == 3_000


def test_a_pdf_bomb_is_refused_by_the_loader_without_inflating_it(tmp_path):
    bomb = hostile.pdf_bomb(tmp_path / "bomb.pdf", 20_000_000)
    assert bomb.stat().st_size < 100_000
    with pytest.raises(IngestError, match="inflates past 1,000,000 bytes"):
        load(bomb, "bomb.pdf", Limits(max_inflated_bytes=1_000_000))


def test_a_pdf_of_many_streams_each_under_the_limit_is_refused_by_its_total(tmp_path):
    # Every page's stream stays under the per-stream limit; together they pass the file's.
    pdf = hostile.pdf_pages_bomb(tmp_path / "pages-bomb.pdf", 6, 2_000_000)
    limits = Limits(max_inflated_bytes=3_000_000, max_inflated_file_bytes=5_000_000)
    with pytest.raises(IngestError) as refused:
        load(pdf, "pages-bomb.pdf", limits)
    assert str(refused.value) == ("pages-bomb.pdf: PDF streams inflate to 6,000,000 bytes by page 3, over the "
                                  "limit of 5,000,000 (raise it with CITEBOT_INGEST_MAX_INFLATED_FILE_BYTES)")
    # Within a larger budget the same file is read, every page of it.
    doc = load(pdf, "pages-bomb.pdf", Limits(max_inflated_bytes=3_000_000, max_inflated_file_bytes=13_000_000))
    assert sum(len(s.paragraphs) for s in doc.sections) == 6


def test_the_file_budget_counts_form_xobjects_once_and_skips_images(tmp_path):
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    from ingest.loaders.pdf_budget import charge_pages

    pdf = hostile.many_pages_pdf(tmp_path / "forms.pdf", 3)
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(pdf))
    form = DecodedStreamObject()
    form.set_data(b"BT /F1 12 Tf 72 700 Td (In a form.) Tj ET" + b" " * 100_000)
    form.update({NameObject("/Type"): NameObject("/XObject"), NameObject("/Subtype"): NameObject("/Form")})
    image = DecodedStreamObject()
    image.set_data(b"\xff" * 500_000)
    image.update({NameObject("/Type"): NameObject("/XObject"), NameObject("/Subtype"): NameObject("/Image")})
    shared = DictionaryObject({NameObject("/Fm1"): writer._add_object(form),
                               NameObject("/Im1"): writer._add_object(image)})
    for page in writer.pages:
        page[NameObject("/Resources")][NameObject("/XObject")] = shared
    writer.write(tmp_path / "forms2.pdf")
    pages = PdfReader(tmp_path / "forms2.pdf").pages
    total = charge_pages(pages, "forms2.pdf", DEFAULT_LIMITS)
    assert 100_000 < total < 101_000 + 3 * 200  # the form once, three short pages, no image


def test_ingest_json_lists_skipped_files_and_library_warnings(tmp_path, monkeypatch, test_embedder):
    docs = _folder(tmp_path)
    # A PDF pypdf reads with a warning (a wrong startxref offset it recovers from).
    import io

    from pypdf import PdfWriter

    writer = PdfWriter()
    page = writer.add_blank_page(200, 200)
    del page  # a blank page has no text: skipped, but it is read and warned about
    buf = io.BytesIO()
    writer.write(buf)
    head, _, tail = buf.getvalue().rpartition(b"startxref")
    (docs / "warned.pdf").write_bytes(head + b"startxref\n9" + tail.lstrip(b"\n0123456789"))
    monkeypatch.setenv("CITEBOT_STORE", str(tmp_path / "cli-store"))
    for name, value in (("BYTES", SMALL.max_bytes), ("PAGES", SMALL.max_pages), ("CHARS", SMALL.max_chars),
                        ("INFLATED_BYTES", SMALL.max_inflated_bytes)):
        monkeypatch.setenv(f"CITEBOT_INGEST_MAX_{name}", str(value))
    from bot.wiring import Components

    # The command line builds its embedder from the settings; the test embedder stands in.
    monkeypatch.setattr(Components, "embedder", test_embedder, raising=False)
    result = CliRunner().invoke(cli, ["ingest", str(docs), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.splitlines()[-1])
    assert set(out) == {"documents", "unchanged", "deleted", "chunks", "skipped", "warnings", "seconds"}
    assert out["documents"] == 1
    skipped = {s["source"]: s["reason"] for s in out["skipped"]}
    assert set(skipped) == {"big.txt", "pages.pdf", "deep.html", "bomb.pdf", "latin1.md", "long.md",
                            "pipe.txt", "warned.pdf"}
    assert "CITEBOT_INGEST_MAX_PAGES" in skipped["pages.pdf"]
    (warned,) = [w for w in out["warnings"] if w["source"] == "warned.pdf"]
    assert "library warning(s) while reading" in warned["reason"]
    assert "(all in the log at debug level)" in warned["reason"]
