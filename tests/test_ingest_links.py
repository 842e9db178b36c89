"""Ingest keeps where a source opens: `url:` front matter, <link rel="canonical">, and the
anchor of each heading where the HTML has ids (pages written here, in the shapes Sphinx,
DocBook and mdBook generate)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ingest.loaders import load_html, load_markdown
from ingest.pipeline import ingest
from ingest.planning import fingerprint
from search.embedded import DB_NAME, EmbeddedStore

SPHINX_LIKE = """<!DOCTYPE html>
<html><head><title>Installing — Kettle 2.1 documentation</title>
<link rel="canonical" href="https://kettle.example.org/en/latest/install.html" />
</head><body>
<div class="sphinxsidebar" role="navigation"><h3>Table of contents</h3><ul><li><a href="#with-pip">With pip</a></li></ul></div>
<div class="body" role="main">
  <section id="installing">
  <h1>Installing<a class="headerlink" href="#installing" title="Link to this heading">¶</a></h1>
  <p>Kettle runs on any machine with a heating element.</p>
  <span id="pip-target"></span><section id="with-pip">
  <h2>With pip<a class="headerlink" href="#with-pip" title="Link to this heading">¶</a></h2>
  <p>Run the installer and wait for the whistle.</p>
  <h3>Behind a proxy</h3>
  <p>Set the proxy variable first.</p>
  </section></section>
</div></body></html>"""

DOCBOOK_LIKE = """<html><head><title>Chapter 2. Basics</title>
<base href="https://book.example.net/guide/" />
<link rel="canonical" href="ch02.html" /></head><body>
<div class="chapter"><div class="titlepage"><div><div>
  <h1 class="title"><a id="ch-basics"></a>Chapter 2. Basics</h1></div></div></div>
  <p>This chapter covers the basics of brewing.</p>
  <div class="section"><div class="titlepage"><div><div>
    <h2 class="title" style="clear: both"><a name="sect-steeping"></a>2.1. Steeping</h2>
  </div></div></div>
  <p>Steep for four minutes.</p></div>
  <a name="sect-old"></a><h2>2.2. Old style</h2><p>An anchor just before the heading.</p>
  <p id="para-id">A paragraph with an id of its own.</p>
  <h2>2.3. No anchor</h2><p>Nothing names this heading.</p>
</div></body></html>"""

MDBOOK_LIKE = """<html><head><title>Getting started</title></head><body><main>
<h1 id="getting-started"><a class="header" href="#getting-started">Getting started</a></h1>
<p>Install the tool.</p>
<h2 id="first-steps"><a class="header" href="#first-steps">First steps</a></h2>
<p>Run it once.</p></main></body></html>"""


def _anchors(doc) -> list[tuple[tuple[str, ...], str | None]]:
    return [(s.heading_path, s.anchor) for s in doc.sections]


# -- loaders ------------------------------------------------------------------------------
def test_markdown_front_matter_names_the_documents_address():
    plain = load_markdown("---\ntitle: Travel\nurl: https://wiki.example.com/travel#top  # ours\n---\n"
                          "# Travel\n\nText.\n", "travel.md")
    assert plain.url == "https://wiki.example.com/travel#top"
    quoted = load_markdown("---\nurl: 'https://wiki.example.com/a b'\n---\n# T\n\nText.\n", "t.md")
    assert quoted.url == "https://wiki.example.com/a b"  # as written; ingest encodes it
    assert load_markdown("---\ntitle: x\n---\n# T\n\nText.\n", "t.md").url is None
    assert load_markdown("# T\n\nurl: https://not.front.matter/\n", "t.md").url is None
    assert [p.text for s in plain.sections for p in s.paragraphs] == ["Text."]


def test_sphinx_like_pages_give_their_canonical_address_and_section_ids():
    doc = load_html(SPHINX_LIKE, "install.html")
    assert doc.url == "https://kettle.example.org/en/latest/install.html"
    assert _anchors(doc) == [
        (("Installing",), "installing"),
        (("Installing", "With pip"), "with-pip"),  # the section's id, nearest the heading
        (("Installing", "With pip", "Behind a proxy"), "with-pip"),  # no id: the nearest above
    ]
    assert doc.sections[1].heading_path[-1] == "With pip"  # the ¶ permalink is not heading text


def test_docbook_like_pages_give_anchors_inside_and_before_headings():
    doc = load_html(DOCBOOK_LIKE, "ch02.html")
    assert doc.url == "https://book.example.net/guide/ch02.html"  # resolved against <base>
    assert _anchors(doc) == [
        (("Chapter 2. Basics",), "ch-basics"),
        (("Chapter 2. Basics", "2.1. Steeping"), "sect-steeping"),
        (("Chapter 2. Basics", "2.2. Old style"), "sect-old"),
        # a paragraph's id is that paragraph's, not the next heading's: the chapter's anchor
        (("Chapter 2. Basics", "2.3. No anchor"), "ch-basics"),
    ]


def test_mdbook_like_headings_carry_their_own_ids():
    doc = load_html(MDBOOK_LIKE, "start.html")
    assert doc.url is None
    assert _anchors(doc) == [(("Getting started",), "getting-started"),
                             (("Getting started", "First steps"), "first-steps")]


def test_a_heading_only_a_permalink_names_still_gets_it():
    doc = load_html("<h2>Limits<a href=\"#limits\" title=\"Permalink to this headline\">¶</a></h2>"
                    "<p>Ten a day.</p>", "limits.html")
    assert _anchors(doc) == [(("Limits",), "limits")]


# -- the pipeline -------------------------------------------------------------------------
def _chunk_links(store) -> dict[str, set[tuple[str | None, str | None]]]:
    out: dict[str, set] = {}
    for c in store.iter_chunks():
        # A chunk that joins short sections opens at each one's own anchor too.
        out.setdefault(c.source, set()).update({(c.url, c.anchor), *((c.url, s.anchor) for s in c.sections)})
    return out


def _collection(root: Path) -> Path:
    docs = root / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "install.html").write_text(SPHINX_LIKE)
    (docs / "travel.md").write_text("---\nurl: https://wiki.example.com/travel guide\n---\n"
                                    "# Travel\n\nTaxis are paid back within a week.\n")
    (docs / "evil.md").write_text("---\nurl: javascript:alert(document.cookie)\n---\n"
                                  "# Evil\n\nThis page tries to run a script.\n")
    (docs / "relative.md").write_text("---\nurl: ../elsewhere/relative.html\n---\n"
                                      "# Relative\n\nA page that names itself relatively.\n")
    (docs / "plain.md").write_text("# Plain\n\nNo address at all.\n")
    return docs


def test_ingest_stores_addresses_and_anchors_and_refuses_bad_ones_with_a_warning(tmp_path, test_embedder):
    docs = _collection(tmp_path)
    store = EmbeddedStore(tmp_path / "s")
    summary = ingest([docs], store, test_embedder, progress=False)
    assert summary.skipped == [] and summary.documents == 5  # a bad address never costs the text
    links = _chunk_links(store)
    assert links["travel.md"] == {("https://wiki.example.com/travel%20guide", None)}
    assert links["guide/install.html"] == {("https://kettle.example.org/en/latest/install.html", a)
                                           for a in ("installing", "with-pip")}
    assert links["evil.md"] == links["relative.md"] == links["plain.md"] == {(None, None)}
    warnings = {w["source"]: w["reason"] for w in summary.as_json()["warnings"]}
    assert set(warnings) == {"evil.md", "relative.md"}
    assert "is not an http(s) address" in warnings["evil.md"] and "not shown as a link" in warnings["evil.md"]
    assert "CITEBOT_SOURCE_URL is unset" in warnings["relative.md"]

    again = ingest([docs], store, test_embedder, progress=False)
    assert again.unchanged == 5 and again.documents == 0
    assert {w.source for w in again.warnings} == {"evil.md", "relative.md"}  # said every run

    # With a template, the relative address resolves, and that document alone is written again.
    third = ingest([docs], store, test_embedder, progress=False,
                   source_url="https://wiki.example.com/docs/{path}")
    assert (third.documents, third.unchanged) == (1, 4)
    assert _chunk_links(store)["relative.md"] == {("https://wiki.example.com/elsewhere/relative.html", None)}
    store.close()


def test_a_store_written_before_links_gets_them_at_the_next_ingest(tmp_path, test_embedder):
    """Documents with an address or anchors are written again once; the others stay as they are."""
    docs = _collection(tmp_path)
    store = EmbeddedStore(tmp_path / "s")
    ingest([docs], store, test_embedder, progress=False)
    store.close()
    # What an earlier version left: no links, and fingerprints of the file contents alone.
    import hashlib

    db = sqlite3.connect(tmp_path / "s" / DB_NAME)
    db.execute("UPDATE chunks SET url = NULL, anchor = NULL")
    for source, in db.execute("SELECT source FROM documents").fetchall():
        raw = hashlib.sha256((docs / source).read_bytes()).hexdigest()
        db.execute("UPDATE documents SET content_hash = ? WHERE source = ?",
                   (fingerprint(raw, docs.resolve()), source))
    db.commit()
    db.close()

    store = EmbeddedStore(tmp_path / "s")
    summary = ingest([docs], store, test_embedder, progress=False)
    assert (summary.documents, summary.unchanged) == (2, 3)  # travel.md and install.html
    links = _chunk_links(store)
    assert links["travel.md"] == {("https://wiki.example.com/travel%20guide", None)}
    assert ("https://kettle.example.org/en/latest/install.html", "with-pip") in links["guide/install.html"]
    store.close()


def test_the_ingest_command_prints_warnings_and_json_holds_them(tmp_path, monkeypatch, test_embedder):
    from click.testing import CliRunner

    import bot.wiring
    from bot.cli import cli

    docs = _collection(tmp_path)
    monkeypatch.setattr(bot.wiring.Components, "embedder", test_embedder, raising=False)
    monkeypatch.setenv("CITEBOT_SOURCE_URL", "https://wiki.example.com/docs/{path}")
    result = CliRunner().invoke(cli, ["ingest", "--json", str(docs)], catch_exceptions=False)
    summary = json.loads(result.output)
    assert [w["source"] for w in summary["warnings"]] == ["evil.md"]
    result = CliRunner().invoke(cli, ["ingest", str(docs)], catch_exceptions=False)
    assert "warning evil.md: the address 'javascript:alert(document.cookie)' is not an http(s) address" \
        in result.output
    chunks = [json.loads(line) for line in
              CliRunner().invoke(cli, ["chunks", "--json"], catch_exceptions=False).output.splitlines()]
    urls = {c["source"]: c["url"] for c in chunks}
    assert urls["plain.md"] == "https://wiki.example.com/docs/plain.md"  # the template
    assert urls["evil.md"] == "https://wiki.example.com/docs/evil.md"  # the bad address never
    assert urls["travel.md"] == "https://wiki.example.com/travel%20guide"  # its own wins
    assert {u for c in chunks if c["source"] == "guide/install.html"
            for u in [c["url"], *(s["url"] for s in c.get("sections", ()))]} == {
        "https://kettle.example.org/en/latest/install.html#installing",
        "https://kettle.example.org/en/latest/install.html#with-pip"}
    hits = json.loads(CliRunner().invoke(cli, ["search", "--json", "taxis paid back within a week"],
                                         catch_exceptions=False).output)["hits"]
    assert hits[0]["source"] == "travel.md" and hits[0]["url"] == "https://wiki.example.com/travel%20guide"
    answer = CliRunner().invoke(cli, ["ask", "Are taxis paid back within a week?"], catch_exceptions=False)
    assert "  [1] travel.md — Travel  https://wiki.example.com/travel%20guide" in answer.output
