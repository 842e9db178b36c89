"""Chunker properties: no heading crossed, overlap byte-identical, most chunks in band."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.chunker import (
    BAND_MAX_TOKENS,
    BAND_MIN_TOKENS,
    PARAGRAPH_SEPARATOR,
    ChunkingConfig,
    chunk_document,
    plan_section,
)
from ingest.document import LoadedDocument, Paragraph, Section


def count_words(text: str) -> int:
    """A stand-in tokenizer for properties: one token per whitespace word."""
    return len(text.split())


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz’–", min_size=1, max_size=9)


@st.composite
def paragraphs(draw, min_words=20, max_words=180):
    n = draw(st.integers(min_words, max_words))
    seed = draw(st.integers(0, 10_000))
    words = [f"w{seed}x{i}" for i in range(n)]
    words[0] = draw(_word)
    return " ".join(words) + "."


@st.composite
def documents(draw):
    sections = []
    for s in range(draw(st.integers(1, 5))):
        paras = draw(st.lists(paragraphs(), min_size=1, max_size=25))
        sections.append(Section((f"Heading {s}",), [Paragraph(p) for p in paras]))
    return LoadedDocument("doc.md", "Doc", "markdown", sections)


@settings(max_examples=150, deadline=None)
@given(documents())
def test_no_heading_crossed_and_every_paragraph_kept(doc):
    chunks = chunk_document(doc, "d", count_words)
    for section in doc.sections:
        mine = [c for c in chunks if c.heading_path == section.heading_path]
        texts = {p.text for p in section.paragraphs}
        # Every chunk's paragraphs come from its own section only.
        for c in mine:
            assert set(c.text.split(PARAGRAPH_SEPARATOR)) <= texts
        # Every paragraph of the section is in some chunk.
        kept = {p for c in mine for p in c.text.split(PARAGRAPH_SEPARATOR)}
        assert kept == texts


@settings(max_examples=150, deadline=None)
@given(documents())
def test_overlap_is_byte_identical_and_recorded(doc):
    chunks = chunk_document(doc, "d", count_words)
    for prev, cur in zip(chunks, chunks[1:]):
        if prev.heading_path != cur.heading_path:
            assert cur.overlap_prev == 0 and prev.overlap_next == 0
            continue
        assert cur.overlap_prev > 0, "consecutive chunks of one section overlap"
        assert cur.overlap_prev == prev.overlap_next
        assert cur.text[: cur.overlap_prev] == prev.text[-prev.overlap_next :]
        # The overlap is whole paragraphs: it ends at a paragraph boundary.
        rest = cur.text[cur.overlap_prev :]
        assert rest.startswith(PARAGRAPH_SEPARATOR)
        assert cur.without_overlap_prev() == rest[len(PARAGRAPH_SEPARATOR) :]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=1, max_size=60))
def test_plan_always_ends_and_adds_a_new_paragraph_each_step(tokens):
    plan = plan_section(tokens, ChunkingConfig())
    assert plan[0][0] == 0 and plan[-1][1] == len(tokens)
    for (s0, e0), (s1, e1) in zip(plan, plan[1:]):
        assert s1 <= e0 < e1  # overlaps (or abuts) and always makes progress
        assert s1 > s0


def test_long_sections_land_mostly_in_band():
    # Prose of 40–160 token paragraphs, as in a handbook: sections of 1,500–3,000 tokens.
    import random

    rng = random.Random(7)
    sizes = []
    for _ in range(200):
        tokens = []
        while sum(tokens) < rng.randint(1500, 3000):
            tokens.append(rng.randint(40, 160))
        for s, e in plan_section(tokens, ChunkingConfig()):
            sizes.append(sum(tokens[s:e]))
    in_band = sum(BAND_MIN_TOKENS <= n <= BAND_MAX_TOKENS for n in sizes) / len(sizes)
    assert in_band >= 0.75, in_band


def test_single_oversized_paragraph_is_its_own_chunk():
    doc = LoadedDocument("x.md", "X", "markdown", [Section(("H",), [
        Paragraph("a " * 900), Paragraph("b " * 100)])])
    chunks = chunk_document(doc, "d", count_words)
    assert chunks[0].text.startswith("a a")
    assert all(c.heading_path == ("H",) for c in chunks)
    assert "b b" in chunks[-1].text


def test_chunk_ids_are_stable_and_distinct():
    doc = LoadedDocument("x.md", "X", "markdown", [Section(("H",), [Paragraph("one two three")]),
                                                   Section(("I",), [Paragraph("one two three")])])
    a = chunk_document(doc, "d", count_words)
    b = chunk_document(doc, "d", count_words)
    assert [c.chunk_id for c in a] == [c.chunk_id for c in b]
    assert len({c.chunk_id for c in a}) == 2


def _capped(doc, max_chars):
    return chunk_document(doc, "d", count_words, ChunkingConfig(max_chars=max_chars))


def test_a_huge_paragraph_is_cut_into_chunks_within_the_char_cap():
    from ingest.chunker import MAX_CHUNK_CHARS

    sentence = "The rover docks at the charging bay before each shift. "
    huge = sentence * (4_900_000 // len(sentence))  # a 4.9 M-character paragraph
    doc = LoadedDocument("x.md", "X", "markdown", [Section(("H",), [
        Paragraph("Before it."), Paragraph(huge), Paragraph("After it.")])])
    chunks = chunk_document(doc, "d", count_words)
    assert max(len(c.text) for c in chunks) <= MAX_CHUNK_CHARS
    assert all(c.heading_path == ("H",) for c in chunks)
    pieces = [c.text for c in chunks if huge[:20] in c.text or c.text in huge]
    # Verbatim: the pieces, their overlap stripped, are the paragraph again.
    joined = "".join(c.without_overlap_prev() for c in chunks)
    assert huge in joined and joined.startswith("Before it.")
    assert len(pieces) >= len(huge) // MAX_CHUNK_CHARS
    # Cut after a sentence end: every piece but the last ends with one.
    middle = [c.text for c in chunks if c.text in huge]
    assert all(t.endswith(". ") for t in middle[:-1])


@settings(max_examples=150, deadline=None)
@given(documents(), st.integers(40, 400), st.data())
def test_char_cap_keeps_chunks_verbatim_and_paragraph_aligned(doc, cap, data):
    # Some paragraphs longer than the cap, some without a blank to cut at.
    for section in doc.sections:
        for i, p in enumerate(section.paragraphs):
            if data.draw(st.booleans()):
                glue = data.draw(st.sampled_from([" ", "", ". "]))
                section.paragraphs[i] = Paragraph(glue.join([p.text] * data.draw(st.integers(2, 6))))
    chunks = _capped(doc, cap)
    assert all(len(c.text) <= cap for c in chunks)
    for section in doc.sections:
        mine = [c for c in chunks if c.heading_path == section.heading_path]
        # Stripped of their overlap, the chunks of a section spell its paragraphs in order,
        # each paragraph whole (its pieces abut) and paragraphs joined by the separator.
        rebuilt = ""
        for prev, c in zip([None, *mine], mine):
            rest = c.without_overlap_prev()
            if prev is None:
                rebuilt = rest
            elif c.overlap_prev:
                rebuilt += PARAGRAPH_SEPARATOR + rest
            else:
                rebuilt += (PARAGRAPH_SEPARATOR if rebuilt_ends_paragraph(rebuilt, section) else "") + rest
        assert rebuilt == PARAGRAPH_SEPARATOR.join(p.text for p in section.paragraphs)
    for prev, cur in zip(chunks, chunks[1:]):
        if cur.overlap_prev:
            assert cur.text[: cur.overlap_prev] == prev.text[-prev.overlap_next :]
            assert cur.text[cur.overlap_prev :].startswith(PARAGRAPH_SEPARATOR)


def rebuilt_ends_paragraph(rebuilt: str, section: Section) -> bool:
    """Whether the text rebuilt so far ends exactly at the end of one of the section's paragraphs."""
    joined = PARAGRAPH_SEPARATOR.join(p.text for p in section.paragraphs)
    ends = set()
    at = 0
    for p in section.paragraphs:
        at += len(p.text)
        ends.add(at)
        at += len(PARAGRAPH_SEPARATOR)
    return len(rebuilt) in ends and joined.startswith(rebuilt)
