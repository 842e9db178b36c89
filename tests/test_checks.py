"""The one normaliser and the checks: honest typography passes, invented text fails."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.answer.checks import check_answer, normalise, quote_in
from bot.answer.turn import flag_inline

SOURCE = (
    "The Release Train leaves every second Tuesday at 10:00 — never on a Friday. "
    "Engineers say “ship the box, not the promise” when a feature slips... and they mean it. "
    "Fix it as and when it is found, not later."
)


@pytest.mark.parametrize("quote", [
    "The Release Train leaves every second Tuesday at 10:00 - never on a Friday",
    "The Release Train leaves every second Tuesday at 10:00 -- never on a Friday.",
    "The Release Train leaves every second Tuesday at 10:00 – never on a Friday",
    "the release train leaves   every second\nTuesday at 10:00—never on a Friday",
    'Engineers say "ship the box, not the promise" when a feature slips',
    "Engineers say ‘ship the box, not the promise’ when a feature slips".replace("‘", "“").replace("’", "”"),
    "when a feature slips… and they mean it",
    "when a feature slips . . . and they mean it",
    "The Release Train leaves … never on a Friday",  # an ellipsis in a quote is a gap
    "Fix it as and when it is found",
])
def test_honest_typography_passes(quote):
    assert quote_in(quote, SOURCE)


@pytest.mark.parametrize("quote", [
    "The Release Train leaves every Monday at 10:00",
    "Fix it when you have time",
    "never on a Friday … every second Tuesday",  # pieces out of order
    "",
    "...",
])
def test_invented_or_reordered_text_fails(quote):
    assert not quote_in(quote, SOURCE)


@given(st.text(min_size=1, max_size=200))
def test_normaliser_is_idempotent(text):
    assert normalise(normalise(text)) == normalise(text)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=4, max_size=80))
def test_any_substring_of_the_source_passes(text):
    source = "Before. " + text + " After."
    if normalise(text).strip(" .,;:!?'\""):
        assert quote_in(text, source)


PASSAGES = {
    1: ("c1", "The Annex assembly point is the yellow bollard by Dock 7."),
    2: ("c2", "Klaxon pages the secondary after 15 minutes without an acknowledgement."),
}


def test_correct_quote_and_citation_verify():
    report = check_answer('Assemble at "the yellow bollard by Dock 7" [1].', PASSAGES, {"c1", "c2"})
    assert [q.verified for q in report.quotes] == [True]
    assert report.valid_citations == 1 and report.failures == 0


def test_invented_sentence_under_a_correct_citation_fails():
    answer = 'The rule is "assemble in the car park by the main gate" [1].'
    report = check_answer(answer, PASSAGES, {"c1", "c2"})
    assert report.quotes[0].verified is False
    assert report.quotes[0].reason == "not found in passage [1]"
    flagged = flag_inline(answer, report)
    assert '"assemble in the car park by the main gate" [1] ⚠️ [quote check failed: not found in passage [1]]' in flagged


def test_quote_from_another_passage_is_mis_cited_not_invented():
    report = check_answer('"pages the secondary after 15 minutes" [1]', PASSAGES, {"c1", "c2"})
    assert report.quotes[0].verified is False
    assert report.quotes[0].found_in == 2
    assert "mis-cited" in report.quotes[0].reason


def test_citation_to_a_passage_not_given_is_flagged_where_it_stands():
    answer = "It is the bollard [1]. Pages go out after 15 minutes [3]. Done."
    report = check_answer(answer, PASSAGES, {"c1", "c2"})
    assert [(c.number, c.resolved) for c in report.citations] == [(1, True), (3, False)]
    flagged = flag_inline(answer, report)
    assert "after 15 minutes [3] ⚠️ [citation points to no passage given]. Done." in flagged


def test_citation_to_a_passage_not_retrieved_this_turn_is_flagged():
    report = check_answer("Bollard [1].", PASSAGES, {"c2"})
    assert report.citations[0].resolved and not report.citations[0].retrieved
    assert "not retrieved this turn" in flag_inline("Bollard [1].", report)
