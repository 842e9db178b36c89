"""Fuzz: a source sentence holding quotation marks of its own, quoted by the extractive
composer, verifies.

Sentences are drawn with inner quotations in every mark citebot meets (straight and curly,
double and single, low-9 and guillemets), unbalanced marks, apostrophes, bracketed
markers and odd spacing. Each is rendered as the composer renders a quotation
(bot/answer/quoting.py), put in an answer line `"…" [1]` and read back by the checks
(bot/answer/checks.py), which must find it in the source through the one normaliser;
and the composer itself, given the sentence as a passage, writes an answer whose every
quotation verifies.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.answer.checks import check_answer, normalise, quote_in
from bot.answer.compose import ExtractiveComposer
from bot.answer.passages import Passage
from bot.answer.quoting import quotation
from search.types import Chunk
from tests.fuzz_support import FUZZ_SETTINGS, within_budget

pytestmark = pytest.mark.fuzz

PAIRS = [('"', '"'), ("\u201c", "\u201d"), ("\u201e", "\u201c"), ("'", "'"), ("\u2018", "\u2019"),
         ("\u00ab", "\u00bb"), ("\u201a", "\u2018"), ("\u201f", "\u201d")]
WORDS = st.sampled_from(["the", "Conductor", "known", "as", "building", "show", "errors", "it's",
                         "customer\u2019s", "Dock", "7", "run", "--force", "x", "pick", "task"])
PUNCT = st.sampled_from(["", "", "", ",", ";", ":", "?", "!", "."])
SPACE = st.sampled_from([" ", " ", " ", "  ", "\u00a0", "\n"])


@st.composite
def quoted(draw) -> str:
    opening, closing = draw(st.sampled_from(PAIRS))
    inner = " ".join(draw(st.lists(WORDS, min_size=1, max_size=4)))
    inside = draw(PUNCT) if draw(st.booleans()) else ""
    return f"{opening}{inner}{inside}{closing}{draw(PUNCT)}"


@st.composite
def sentences(draw) -> str:
    pieces = draw(st.lists(st.one_of(WORDS, WORDS, quoted(), st.sampled_from(['"', "\u201d", "[3]", "'"])),
                           min_size=5, max_size=30))
    if not any(any(m in p for pair in PAIRS for m in pair) for p in pieces):
        pieces.insert(draw(st.integers(0, len(pieces))), draw(quoted()))
    text = ""
    for p in pieces:
        text += p + draw(SPACE)
    return text.strip() + "."


def _chunk(text: str) -> Chunk:
    return Chunk(chunk_id="c1", doc_id="d.md", source="d.md", heading_path=("Guide",), page=None,
                 ordinal=0, text=text, tokens=len(text.split()))


@FUZZ_SETTINGS
@given(text=sentences())
def test_a_sentence_with_inner_quotes_rendered_as_a_quotation_verifies(text):
    q = within_budget(lambda: quotation(text))
    assert not any(m in q for m in '"\u201c\u201d\u201e'), q  # a double mark would end our quotation
    if not q.strip(" .,;:!?'\u2026"):
        return  # nothing but marks: nothing to quote
    assert quote_in(q, text), (q, text)
    report = check_answer(f'The collection says:\n• "{q}" [1]', {1: ("c1", text)}, {"c1"})
    assert [x.verified for x in report.quotes] == [True], (q, text, report.quotes)


@FUZZ_SETTINGS
@given(text=sentences())
def test_the_composer_quotes_such_a_sentence_and_every_quotation_verifies(text):
    comp = ExtractiveComposer(None).compose("what is the Conductor known as", [Passage(1, _chunk(text), text)],
                                            [], [])
    report = check_answer(comp.text, {1: ("c1", text)}, {"c1"})
    assert all(x.verified for x in report.quotes), [(x.text, x.reason) for x in report.quotes]
    assert comp.refused or report.quotes


@FUZZ_SETTINGS
@given(mark=st.sampled_from(sorted({m for pair in PAIRS for m in pair} | {"\u2019", "\u201b", "`"})),
       words=st.lists(WORDS, min_size=1, max_size=5))
def test_the_normaliser_reads_every_quote_mark_as_one(mark, words):
    inner = " ".join(words)
    assert normalise(f"a {mark}{inner}{mark} b") == normalise(f"a '{inner}' b")
