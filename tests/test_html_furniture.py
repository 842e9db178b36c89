"""Page furniture never becomes chunk text: structure, generator names, markers, repetition.

Every page here is written for this test, shaped like what the named generator emits.
"""

from __future__ import annotations

from pathlib import Path

from ingest.loaders import load_html
from ingest.pipeline import ingest, load_collection
from search.embedded import EmbeddedStore

BODY = "The night shift checks every Battery Swap Station before the first wave of orders."
MORE = "A station that reports a cell above forty-five degrees is taken out of rotation."


def paragraphs(html: str) -> list[str]:
    return [p.text for s in load_html(html, "p.html").sections for p in s.paragraphs]


def headings(html: str) -> list[tuple[str, ...]]:
    return [s.heading_path for s in load_html(html, "p.html").sections]


def page(body: str, title: str = "Swap stations") -> str:
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body}</body></html>"


def test_landmarks_and_roles_are_furniture_but_not_inside_the_content():
    html = page(
        "<header><a href='index.html'>Quillmate docs</a></header>"
        "<nav><ul><li><a href='a.html'>Alpha</a></li><li><a href='b.html'>Beta</a></li></ul></nav>"
        "<div role='navigation'><a href='x.html'>Elsewhere</a></div>"
        "<section><header><p>Filed under operations</p></header><h1>Stations</h1>"
        f"<p>{BODY}</p><aside class='footnote'><p>{MORE}</p></aside></section>"
        "<aside><p>Popular pages this week</p></aside>"
        "<div role='contentinfo'><p>Quillmate Robotics</p></div><footer><p>Imprint</p></footer>")
    assert paragraphs(html) == ["Filed under operations", BODY, MORE]


def test_sphinx_page_keeps_only_its_main_text_and_drops_permalinks():
    html = page(
        "<div class='related' role='navigation'><h3>Navigation</h3><ul><li class='right'>"
        "<a href='genindex.html'>index</a></li><li><a href='next.html'>next</a> |</li></ul></div>"
        "<div class='document'><div class='documentwrapper'><div class='body' role='main'>"
        "<section id='swap'><h1>Swap stations<a class='headerlink' href='#swap' "
        "title='Permalink to this heading'>¶</a></h1>"
        f"<p>{BODY}</p><dl><dt id='f'><span>check_cells</span>(<em>station</em>)"
        "<a class='reference internal' href='_modules/x.html'><span class='viewcode-link'>"
        "<span class='pre'>[source]</span></span></a><a class='headerlink' href='#f'>¶</a></dt>"
        f"<dd><p>{MORE}</p></dd></dl></section></div></div>"
        "<div class='sphinxsidebar' role='navigation'><h3>Quick search</h3><p>Go</p></div></div>"
        "<div class='footer' role='contentinfo'>&#169; Copyright 2026. Created using Sphinx.</div>")
    assert paragraphs(html) == [BODY, "check_cells(station)", MORE]
    assert headings(html) == [("Swap stations",)]


def test_rustdoc_version_stamps_and_source_links_are_dropped():
    html = page(
        "<div id='versioninfo'><span class='white-sticker'><a href='https://example.org'>Quill</a>"
        " 4.2.0</span><br></div>"
        "<main><h1 class='fqn'>Struct <a href='#'>Station</a><span class='out-of-band'>"
        "<span class='since' title='Stable since 1.2.0'>1.2.0</span> · <a class='srclink' "
        "href='../src/station.rs.html#10'>source</a></span></h1>"
        f"<details class='toggle top-doc' open><summary class='hideme'><span>Expand description</span>"
        f"</summary><p>{BODY}</p></details>"
        "<section id='method.swap' class='method has-srclink'><span class='rightside'>"
        "<span class='since' title='Stable since 1.4.0'>1.4.0</span> · <a class='srclink' "
        "href='../src/station.rs.html#42'>source</a></span><h4 class='code-header'>pub fn "
        f"<a href='#method.swap'>swap</a>(&amp;mut self)</h4></section><p>{MORE} "
        "<a href='trait.Swap.html#tymethod.swap'>Read more</a></p></main>")
    assert paragraphs(html) == [BODY, MORE]
    assert all("1.2.0" not in h and "1.4.0" not in h for path in headings(html) for h in path)
    assert [h[-1] for h in headings(html)] == ["Struct Station", "pub fn swap(&mut self)"]


def test_docbook_navigation_and_table_of_contents_are_dropped():
    html = page(
        "<div class='navheader'><table><tr><th colspan='3'>Chapter 3. Stations</th></tr>"
        "<tr><td><a accesskey='p' href='ch02.html'>Prev</a></td><td></td>"
        "<td><a accesskey='n' href='ch04.html'>Next</a></td></tr></table><hr></div>"
        "<div class='chapter'><h1>Chapter 3. Stations</h1><div class='toc'><p><b>Table of Contents</b></p>"
        "<dl><dt><span class='section'><a href='#s1'>3.1. Checks</a></span></dt></dl></div>"
        f"<div class='section'><h2 id='s1'>3.1. Checks</h2><p>{BODY}</p></div></div>"
        "<div class='navfooter'><table><tr><td><a href='ch02.html'>Prev</a></td>"
        "<td><a accesskey='u' href='index.html'>Up</a></td></tr></table></div>")
    assert paragraphs(html) == [BODY]


def test_asciidoc_keeps_its_header_section_and_drops_toc_and_footer():
    html = page(
        "<div id='header'><h1>quill-swap(1) Manual Page</h1><div id='toc'><div id='toctitle'>"
        "Table of Contents</div></div><h2>NAME</h2><div class='sectionbody'><p>quill-swap - swap a "
        "battery</p></div></div><div id='content'><div class='sect1'><h2>DESCRIPTION</h2>"
        f"<div class='paragraph'><p>{BODY}</p></div></div></div>"
        "<div id='footnotes'><hr></div><div id='footer'><div id='footer-text'>Last updated "
        "2026-05-31 00:35:55 UTC</div></div>")
    assert paragraphs(html) == ["quill-swap - swap a battery", BODY]


def test_mdbook_and_javadoc_pages_keep_what_is_inside_main():
    mdbook = page(
        "<nav id='sidebar' class='sidebar'><div class='sidebar-scrollbox'><ol class='chapter'>"
        "<li><a href='intro.html'>Introduction</a></li></ol></div></nav>"
        "<div id='menu-bar' class='menu-bar'><h1 class='menu-title'>The Quill Book</h1></div>"
        f"<main><h1><a class='header' href='#stations'>Stations</a></h1><p>{BODY}</p></main>"
        "<nav class='nav-wrapper'><a rel='prev' href='intro.html'>&larr;</a></nav>")
    assert paragraphs(mdbook) == [BODY]
    assert headings(mdbook) == [("Stations",)]
    javadoc = page(
        "<header role='banner' class='flex-header'><nav role='navigation'><div class='top-nav' "
        "id='navbar-top'><div class='skip-nav'><a href='#skip'>Skip navigation links</a></div>"
        "<ul class='nav-list'><li><a href='index.html'>Overview</a></li></ul></div></nav></header>"
        "<main role='main'><div class='header'><h1 class='title'>Class Station</h1></div>"
        f"<div class='block'>{BODY}</div></main>"
        "<footer role='contentinfo'><p class='legal-copy'><small>Copyright 2026.</small></p></footer>")
    assert paragraphs(javadoc) == [BODY]
    assert headings(javadoc) == [("Class Station",)]


def test_hand_written_site_markers_and_paragraph_shapes():
    html = page(
        "<div class=nosearch><div class='menu mainmenu'><ul><li><a href='index.html'>Home</a>"
        "<li><a href='about.html'>About</a></ul></div><h2>Swap stations</h2></div>"
        "<p><a href='#main'>Skip to main content</a></p>"
        "<p><a href='index.html'>Home</a> &rsaquo; <a href='ops.html'>Operations</a> &rsaquo; Stations</p>"
        "<p><a href='a.html'>&laquo; Previous</a> | <a href='index.html'>Up</a> | "
        "<a href='c.html'>Next &raquo;</a></p>"
        f"<h3>Checks <a href='#checks'>#</a> <a href='edit/checks'>[edit]</a></h3><p>{BODY}</p>"
        "<ul><li><a href='#one'>One</a></li><li><a href='#two'>2. Two</a></li></ul>"
        f"<ul><li><a href='#one'>Stations</a> are checked nightly.</li><li>{MORE}</li></ul>"
        "<p>This page last modified on 2026-01-20 21:38:08 UTC</p>")
    assert paragraphs(html) == [BODY, "Stations are checked nightly.", MORE]
    assert headings(html) == [("Swap stations", "Checks")]  # the title kept as a heading


def test_a_mismatched_heading_end_tag_still_ends_the_heading():
    # sqlite.org's keyword index opens <h2> and closes </h1>: the page is its links, not one heading.
    html = page(f"<h2 align=center>Keyword Index</h1><ul><li><a href='a.html'>ACID</a></li></ul><p>{BODY}</p>")
    assert headings(html) == [("Keyword Index",)]
    assert paragraphs(html) == ["ACID", BODY]


def test_a_page_without_furniture_reads_as_before():
    html = page(f"<h1>Top</h1><p>Fish &amp; chips&rsquo;\n  today</p><h2>Next</h2><ul><li>one</li>"
                "<li><a href='x.html'>two</a></li></ul><table><tr><td>a</td><td>b</td></tr></table>"
                f"<p>{BODY} <a href='other.html'>See the runbook</a>.</p>")
    assert paragraphs(html) == ["Fish & chips’ today", "one", "two", "a | b", f"{BODY} See the runbook."]


def _site(root: Path, pages: int, footer: str, middle: str = "") -> None:
    root.mkdir(parents=True)
    for i in range(pages):
        (root / f"p{i}.html").write_text(page(
            f"<h1>Page {i}</h1><p>{BODY} Page {i}.</p><p>{MORE} Bay {i}.</p>"
            f"<p>Station {i} has {i + 2} docks.</p><p>{middle}</p><p>Shift {i} starts at dawn.</p>"
            f"<p>Crew {i} signs the log.</p><p>{footer}</p>", title=f"Page {i}"))


def test_a_paragraph_framing_most_pages_of_a_folder_is_furniture(tmp_path):
    _site(tmp_path / "big", 10, "Maintained by the docs team, report errors to the desk.",
          middle="Wear gloves when you touch a cell.")
    docs, skipped = load_collection([tmp_path / "big"])
    assert skipped == [] and len(docs) == 10
    texts = [p.text for d in docs for s in d.sections for p in s.paragraphs]
    assert not any(t.startswith("Maintained by") for t in texts)
    # Repeated inside the pages (not framing them): the page's own text, kept.
    assert texts.count("Wear gloves when you touch a cell.") == 10
    # A small folder is never judged: the same footer on 4 of 4 pages stays.
    _site(tmp_path / "small", 4, "Maintained by the docs team, report errors to the desk.")
    docs, _ = load_collection([tmp_path / "small"])
    assert sum(p.text.startswith("Maintained by") for d in docs for s in d.sections for p in s.paragraphs) == 4


def test_repetition_is_judged_again_when_the_folder_grows(tmp_path, embedder):
    site = tmp_path / "site"
    _site(site, 7, "Maintained by the docs team, report errors to the desk.")
    store = EmbeddedStore(tmp_path / "s")
    ingest([site], store, embedder, progress=False)
    assert sum("Maintained by" in c.text for c in store.iter_chunks()) == 7
    for i in range(7, 9):  # two more pages: now 9 pages share the footer
        (site / f"p{i}.html").write_text(page(
            f"<h1>Page {i}</h1><p>{BODY} Page {i}.</p><p>Maintained by the docs team, report errors "
            "to the desk.</p>", title=f"Page {i}"))
    summary = ingest([site], store, embedder, progress=False)
    assert summary.documents == 9 and summary.unchanged == 0
    assert not any("Maintained by" in c.text for c in store.iter_chunks())
    # One page named on its own is judged with its folder's pages: nothing changes.
    alone = ingest([site / "p3.html"], store, embedder, progress=False)
    assert (alone.documents, alone.unchanged) == (0, 1)
    assert not any("Maintained by" in c.text for c in store.iter_chunks())


def test_a_docbook_sidebar_box_is_the_books_text():
    """DocBook and Publican render <sidebar> (tips, cautions, "going further" boxes) as
    div.sidebar in the page's flow, outside any article element: content, not furniture."""
    html = page(
        "<div class='navheader'><a href='prev.html'>Prev</a> <a href='next.html'>Next</a></div>"
        "<div class='section'><h2 class='title'>Stations</h2><p>" + BODY + "</p></div>"
        "<div class='sidebar'><div class='titlepage'><p class='title'><b>TIP</b> Cooling first</p></div>"
        "<p>" + MORE + "</p></div>")
    assert MORE in paragraphs(html)
