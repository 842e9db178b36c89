"""A long question (up to the Slack adapter's cut, QUESTION_MAX_CHARS) gets an answer or a
refusal with the real model: every place that embeds the question fits it to the model's
window of 256 tokens (retrieval averages the question's windows; the extractive composer
embeds the question the same way), where a window over it used to fail the turn."""

from __future__ import annotations

import pytest

from bot.settings import load_settings
from bot.slack.inbound import QUESTION_MAX_CHARS
from bot.wiring import Components

QUESTION = "How often does the Release Train leave?"
# Words of the handbook's own prose, so the question still finds passages to quote from.
FILLER = ("Some context first: we ship the conductor service and read the release notes, the "
          "soak run and the rollback plan before every train, and our team keeps a runbook. ")


def long_question(chars: int) -> str:
    body = (FILLER * (chars // len(FILLER) + 1))[: chars - len(QUESTION) - 1]
    return body + " " + QUESTION


@pytest.fixture()
def components(examples_store, embedder):
    c = Components(load_settings())
    c.store, c.embedder = examples_store, embedder
    return c


@pytest.mark.slow
@pytest.mark.parametrize("chars", [1_300, 2_500, QUESTION_MAX_CHARS])
def test_a_long_question_gets_an_answer_or_a_refusal_not_an_error(components, embedder, chars):
    question = long_question(chars)
    assert embedder.count_tokens(question) > embedder.max_tokens  # over one window of the model
    record = components.answerer.ask(question)
    assert record.error is None, record.error
    assert record.refused or (record.answer and record.citations), record


@pytest.mark.slow
def test_a_long_question_is_retrieved_by_the_meaning_of_all_of_it(components, embedder):
    """The query vector of a question over one window is the mean of its windows' vectors,
    so the question at the end (past the first window) still pulls the train's passage."""
    record = components.answerer.ask(long_question(QUESTION_MAX_CHARS))
    assert any("train" in p.get("text", p.get("heading", "")).lower() or "release" in str(p).lower()
               for p in record.passages), record.passages
