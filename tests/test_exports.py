"""Wiki exports as sources: a Confluence space export (HTML zip) and a Notion export
(Markdown & CSV zip, whole or in parts, or unzipped in a folder), synced into a real
embedded store; what is stored (names, headings, text), what is left out and why, and the
archive limits (size, ratio, nesting, members)."""

from __future__ import annotations

import re
import zipfile

import pytest

from bot.testing.embedder import HashingEmbedder
from ingest import archives
from ingest.exports import plan
from ingest.limits import Limits
from ingest.loaders import load
from ingest.sources import Source
from ingest.sync import sync_source
from search.embedded import EmbeddedStore
from search.errors import IngestError
from tests.export_fixtures import (
    FURNITURE,
    ID,
    WRAPPER,
    confluence_files,
    make_zip,
    notion_files,
    write_tree,
    zip_bytes,
)

EMBEDDER = HashingEmbedder()
HEX_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture()
def store(tmp_path):
    s = EmbeddedStore(tmp_path / "store")
    yield s
    s.close()


def run(source: Source, store, tmp_path, **kw):
    return sync_source(source, store, EMBEDDER, tmp_path / "cache", progress=False, **kw)


def stored(store) -> dict[str, list[tuple[tuple[str, ...], str]]]:
    """Per stored document: (heading path, text) of each section of each chunk."""
    out: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    for c in store.iter_chunks():
        parts = [(c.heading_path, c.text)] if not c.sections else [
            (s.heading_path, c.text) for s in c.sections]
        out.setdefault(c.source, []).extend(parts)
    return out


def reasons(report) -> dict[str, str]:
    return {s.source: s.reason for s in report.skipped}


def test_a_confluence_space_export_is_stored_without_its_furniture(tmp_path, store):
    report = run(Source("eng", "archive", str(make_zip(tmp_path / "ENG.zip", confluence_files()))), store, tmp_path)
    assert report.error is None
    docs = stored(store)
    assert set(docs) == {"eng/ENG/Engineering-Home_65537.html", "eng/ENG/Deploy-checklist_65538.html",
                         "eng/ENG/attachments/65538/65601.txt"}
    deploy = docs["eng/ENG/Deploy-checklist_65538.html"]
    headings = {h for h, _ in deploy}
    # The page title (without the space name) heads every section of its page.
    assert headings == {("Deploy checklist", "Before the deploy"),
                        ("Deploy checklist", "Before the deploy", "Rollback")}
    text = " ".join(t for _, t in deploy)
    assert "Freeze merges to the release branch an hour before the window opens." in text
    assert "Roll back by redeploying the previous tag; never patch a live host by hand." in text
    home = docs["eng/ENG/Engineering-Home_65537.html"]
    assert {h for h, _ in home} == {("Engineering Home",), ("Engineering Home", "On-call")}
    # Furniture share 0: no chunk of the export holds any of Confluence's furniture.
    every = [t for parts in docs.values() for _, t in parts] + [" ".join(h) for parts in docs.values()
                                                                 for h, _ in parts]
    assert not [f for f in FURNITURE for t in every if f in t]
    assert "Redeploy the previous tag with the deploy tool." in " ".join(
        t for _, t in docs["eng/ENG/attachments/65538/65601.txt"])
    why = reasons(report)
    assert "index page of the Confluence export" in why["eng/ENG/index.html"]
    assert "format citebot does not read (.png)" in why["eng/ENG/attachments/65538/65602.png"]
    assert "style sheets, icons" in why["eng/ENG/styles/site.css"]
    assert "style sheets, icons" in why["eng/ENG/images/icons/bullet_blue.gif"]


def test_a_confluence_page_is_recognised_by_its_markup_wherever_it_is_read(tmp_path):
    folder = write_tree(tmp_path / "unzipped", confluence_files())
    doc = load(folder / "ENG/Deploy-checklist_65538.html", "Deploy-checklist_65538.html")
    assert doc.title == "Deploy checklist"
    assert doc.sections[0].heading_path == ("Deploy checklist", "Before the deploy")
    assert doc.sections[0].anchor == "Deploychecklist-Beforethedeploy"
    with pytest.raises(IngestError, match="index page of a Confluence space export"):
        load(folder / "ENG/index.html", "index.html")
    # A page that only looks alike (no Confluence header) is ordinary HTML.
    plain = tmp_path / "plain.html"
    plain.write_text("<html><head><title>A : B</title></head><body><h1>A : B</h1><p>Text.</p>"
                     "<div class='greybox'>Kept.</div></body></html>", "utf-8")
    page = load(plain, "plain.html")
    assert page.title == "A : B" and page.sections[0].heading_path == ("A : B",)
    assert [p.text for p in page.sections[0].paragraphs] == ["Text.", "Kept."]


def _check_notion(report, store, prefix: str) -> None:
    assert report.error is None
    docs = stored(store)
    p = f"{prefix}/Handbook"
    assert set(docs) == {f"{prefix}/Handbook.md", f"{p}/Projects.md", f"{p}/Projects/Launch plan.md",
                         f"{p}/Tasks.csv", f"{p}/Tasks/Fix login.md", f"{p}/Notes (66666666).md",
                         f"{p}/Notes (11111111).md"}
    assert not [s for s in docs if HEX_ID.search(s)]
    assert not [h for parts in docs.values() for path, _ in parts for h in path if HEX_ID.search(h)]
    assert {h for h, _ in docs[f"{p}/Projects/Launch plan.md"]} == {("Launch plan",), ("Launch plan", "Dates")}
    assert "The beta opens to ten customers" in docs[f"{p}/Projects/Launch plan.md"][-1][1]
    # The database: every row of the complete CSV, each cell named by its header.
    (heading, rows), = {(h, t) for h, t in docs[f"{p}/Tasks.csv"]}
    assert heading == ("Tasks",)
    assert "Name: Fix login | Status: Done | Owner: Ana" in rows
    assert "Name: Write docs | Status: Not started | Owner: Sam | Notes: Cover the API, then the CLI" in rows
    assert "Spring" not in rows and "Retro notes from the spring release." in docs[f"{p}/Notes (66666666).md"][0][1]
    why = reasons(report)
    view = f"/Handbook {ID['handbook']}/Tasks {ID['tasks']}.csv"
    assert any(k.endswith(view) and "all of its rows are in" in r and "staged as Tasks.csv" in r
               for k, r in why.items())
    assert any(k.endswith("timeline.png") and "does not read (.png)" in r for k, r in why.items())


def test_a_notion_export_loses_its_ids_and_keeps_its_tree_and_tables(tmp_path, store):
    archive = make_zip(tmp_path / "notion.zip", notion_files())
    report = run(Source("team", "archive", str(archive)), store, tmp_path)
    _check_notion(report, store, "team")
    assert f"team/{WRAPPER}/Handbook {ID['handbook']}/Projects {ID['projects']}/timeline.png" in reasons(report)


def test_a_notion_export_in_parts_is_opened_one_level_deep(tmp_path, store):
    files = list(notion_files().items())
    parts = {"Export-Part-1.zip": zip_bytes(dict(files[:4])),
             "Export-Part-2.zip": zip_bytes({**dict(files[4:]), "deeper/inner.zip": zip_bytes({"x.md": "# X\n"})})}
    report = run(Source("team", "archive", str(make_zip(tmp_path / "parts.zip", parts))), store, tmp_path)
    _check_notion(report, store, "team")
    assert "archive inside the part Export-Part-2.zip" in reasons(report)["team/deeper/inner.zip"]


def test_an_unzipped_notion_export_in_a_folder_source_is_staged_alike(tmp_path, store):
    folder = write_tree(tmp_path / "exported", notion_files())
    report = run(Source("team", "folder", str(folder)), store, tmp_path)
    _check_notion(report, store, "team")


def test_names_that_only_look_like_an_export_are_kept_as_they_are():
    names = ["notes.md", "guide.md", "build 0123456789abcdef0123456789abcdef.md", "a.md"]
    p = plan(names)
    assert p.kind is None and p.names == {n: n for n in names}
    # A static site's index beside its pages and style sheet: no page is named by its id.
    assert plan(["index.html", "about.html", "styles/site.css"]).kind is None
    assert plan(["ENG/index.html", "ENG/12345.html"]).kind == "confluence"  # an older server's page names


def test_archive_limits_skip_or_refuse_with_their_reasons(tmp_path, store, monkeypatch):
    bomb = b"\0" * 3_000_000  # deflates about 1,000 to 1
    files = {"docs/ok.md": "# Ok\n\nFine.\n", "docs/bomb.md": bomb, "docs/big.md": "# Big\n\n" + "x " * 6_000,
             "docs/old.zip": zip_bytes({"a.md": "# A\n"})}
    archive = make_zip(tmp_path / "limits.zip", files)
    report = run(Source("lim", "archive", str(archive)), store, tmp_path, limits=Limits(max_bytes=5_000_000))
    assert report.error is None
    why = reasons(report)
    assert "over 100 times its size in the archive" in why["lim/docs/bomb.md"]
    assert "archive inside the archive (not opened" in why["lim/docs/old.zip"]
    assert set(stored(store)) == {"lim/docs/ok.md", "lim/docs/big.md"}
    small = run(Source("lim2", "archive", str(archive)), store, tmp_path, limits=Limits(max_bytes=10_000))
    assert "over the limit of 10,000 for one file" in reasons(small)["lim2/docs/big.md"]
    # Members are counted across an export's parts; over the limit the archive is refused whole.
    monkeypatch.setattr(archives, "MAX_ARCHIVE_MEMBERS", 5)
    parts = make_zip(tmp_path / "parts.zip", {"P-1.zip": zip_bytes({f"a{i}.md": "# A\n" for i in range(3)}),
                                              "P-2.zip": zip_bytes({f"b{i}.md": "# B\n" for i in range(3)})})
    before = set(stored(store))
    refused = run(Source("lim", "archive", str(parts)), store, tmp_path)
    assert refused.error and "parts have over 5 members together" in refused.error
    assert set(stored(store)) == before
    evil = make_zip(tmp_path / "evil.zip", {"P-1.zip": zip_bytes({"../out.md": "# Out\n"})})
    escaped = run(Source("lim", "archive", str(evil)), store, tmp_path)
    assert escaped.error and "P-1.zip: '../out.md'" in escaped.error and "refused whole" in escaped.error
    with zipfile.ZipFile(archive) as z:  # the bomb really is one: its ratio as stored
        info = z.getinfo("docs/bomb.md")
        assert info.file_size / info.compress_size > archives.MAX_ARCHIVE_RATIO


def test_a_csv_file_is_a_table_within_the_text_limit(tmp_path):
    table = tmp_path / "people.csv"
    table.write_text('Name,Team\n"Ana Ruiz","Platform, on call"\n,\nSam Lee,Data,extra\n', "utf-8")
    doc = load(table, "people.csv")
    assert doc.title == "people" and doc.format == "csv"
    assert [p.text for p in doc.sections[0].paragraphs] == [
        "Name: Ana Ruiz | Team: Platform, on call", "Name: Sam Lee | Team: Data | column 3: extra"]
    long = tmp_path / "long.csv"
    long.write_text("Name,Notes\nx," + "y" * 2_000 + "\n", "utf-8")
    with pytest.raises(IngestError, match="not a readable CSV file"):
        load(long, "long.csv", Limits(max_chars=1_000))
    headless = tmp_path / "empty-header.csv"
    headless.write_text(",,\na,b,c\n", "utf-8")
    with pytest.raises(IngestError, match="no header row"):
        load(headless, "empty-header.csv")
