"""Short sections join a neighbour (docs/decisions/0029-short-chunks.md): a stub no longer
stands alone, every section of a joined chunk keeps its verbatim text, heading and anchor,
nothing joins across documents or pages, and a quotation is cited under its own heading."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.answer.passages import cited_under
from ingest.chunker import PARAGRAPH_SEPARATOR, STUB_TOKENS, chunk_document
from ingest.document import LoadedDocument, Paragraph, Section
from ingest.loaders import load_html, load_markdown
from search.embedded import EmbeddedStore
from search.types import common_prefix
from tests.elastic_support import es_alias, es_url  # noqa: F401 (fixtures)
from tests.test_ingest_links import SPHINX_LIKE
from tests.test_store_contract import E1, STAMP, backend, make_doc  # noqa: F401 (backend: a fixture)


def count_words(text: str) -> int:
    return len(text.split())


def _page(k: int) -> str:
    """A handbook page as teams write them: an introduction line, stub sections, one real one."""
    body = " ".join(f"word{k}x{i}" for i in range(150)) + "."
    return (f"# Page {k}\n\nWhat page {k} is for.\n\n## Who to ask\n\nAsk the team in chat.\n\n"
            f"## How it works\n\n{body}\n\n## See also\n\nThe onboarding page.\n")


def test_stub_sections_no_longer_stand_alone():
    chunks = [c for k in range(20)
              for c in chunk_document(load_markdown(_page(k), f"p{k}.md"), f"d{k}", count_words)]
    short = [c for c in chunks if c.tokens < STUB_TOKENS]
    # Before: 3 chunks of 4 were stubs (the introduction, "Who to ask", "See also").
    assert len(short) / len(chunks) <= 0.10, [c.text for c in short]
    joined = [c for c in chunks if c.sections]
    assert joined and all(c.heading_path == ("Page 0",) for c in joined if c.source == "p0.md")


def test_a_quotation_from_a_joined_section_is_cited_under_its_own_heading_and_anchor():
    doc = load_html(SPHINX_LIKE, "guide/install.html")
    (chunk,) = chunk_document(doc, "d", count_words)  # three stub sections, one chunk
    assert chunk.heading_path == ("Installing",) and chunk.anchor == "installing"
    assert [(s.heading_path, s.anchor) for s in chunk.sections] == [
        (("Installing",), "installing"), (("Installing", "With pip"), "with-pip"),
        (("Installing", "With pip", "Behind a proxy"), "with-pip")]
    assert cited_under(chunk, ["Run the installer and wait for the whistle."]) == (
        ("Installing", "With pip"), "with-pip")
    assert cited_under(chunk, ["Set the proxy variable first"]) == (
        ("Installing", "With pip", "Behind a proxy"), "with-pip")
    # Quotations from two sections, or none: the heading all the sections sit under.
    assert cited_under(chunk, ["Run the installer", "any machine with a heating element"]) == (
        ("Installing",), "installing")
    assert cited_under(chunk, []) == (("Installing",), "installing")


def test_sections_on_other_pages_or_without_a_common_heading_never_join():
    paged = LoadedDocument("slides.pdf", "Slides", "pdf", [
        Section(("Deck", "Slide 1"), [Paragraph("A slide.", "1")]),
        Section(("Deck", "Slide 1", "Notes"), [Paragraph("Its notes.", "2")]),
        Section(("Deck", "Slide 2"), [Paragraph("Another slide.", "2")]),
        Section(("Other",), [Paragraph("No heading in common.", "2")]),
    ])
    chunks = chunk_document(paged, "d", count_words)
    assert [(c.page, c.heading_path) for c in chunks] == [
        ("1", ("Deck", "Slide 1")), ("2", ("Deck",)), ("2", ("Other",))]
    assert [s.heading_path for s in chunks[1].sections] == [("Deck", "Slide 1", "Notes"), ("Deck", "Slide 2")]


_heading = st.sampled_from([("A",), ("A", "B"), ("A", "B", "C"), ("A", "D"), ("E",), ()])


@st.composite
def nested_documents(draw):
    sections = []
    for s in range(draw(st.integers(1, 8))):
        paras = [" ".join(f"w{s}x{j}x{i}" for i in range(draw(st.integers(1, 120))))
                 for j in range(draw(st.integers(1, 4)))]
        page = draw(st.sampled_from([None, "1", "2"]))
        sections.append(Section(draw(_heading), [Paragraph(p, page) for p in paras]))
    return LoadedDocument("doc.md", "Doc", "markdown", sections)


@settings(max_examples=150, deadline=None)
@given(nested_documents())
def test_joined_chunks_are_verbatim_sections_under_their_heading(doc):
    chunks = chunk_document(doc, "d", count_words)
    # Every paragraph is kept once, in order (overlap stripped), verbatim.
    kept = [p for c in chunks for p in c.without_overlap_prev().split(PARAGRAPH_SEPARATOR)]
    assert kept == [p.text for s in doc.sections for p in s.paragraphs]
    whole = [(s.heading_path, PARAGRAPH_SEPARATOR.join(p.text for p in s.paragraphs)) for s in doc.sections]
    for c in chunks:
        if not c.sections:
            continue
        assert c.overlap_prev == c.overlap_next == 0 and "–" not in (c.page or "")
        assert c.heading_path and c.heading_path == common_prefix([s.heading_path for s in c.sections])
        # Each section's text is its paragraphs, byte for byte, where it says it starts; the
        # sections are consecutive sections of the document.
        parts = [(path, c.text[start:end].removesuffix(PARAGRAPH_SEPARATOR))
                 for start, end, path, _anchor in c.section_spans()]
        assert any(whole[i:i + len(parts)] == parts for i in range(len(whole)))
        assert c.text.startswith(parts[0][1]) and c.sections[0].start == 0


def test_both_stores_keep_a_chunks_sections_and_search_their_headings(backend):  # noqa: F811
    doc, (chunk,), windows = make_doc("guide.md", [(("Guide",), "Intro line.\n\nPip works.", [E1])])
    from search.types import ChunkSection

    chunk = type(chunk)(**{**chunk.__dict__, "sections": (
        ChunkSection(0, ("Guide",), "guide"), ChunkSection(13, ("Guide", "Wheelhouse"), "wheelhouse"))})
    store = backend.open()
    store.open_for(STAMP)
    store.replace_document(doc, [chunk], windows)
    store.commit_ingest()
    again = backend.open()
    assert again.iter_chunks() == [chunk]
    assert "wheelhouse" in again.vocabulary()  # a joined section's heading is searched too
    if isinstance(again, EmbeddedStore):
        assert again.get_chunks([chunk.chunk_id])[0].sections == chunk.sections
