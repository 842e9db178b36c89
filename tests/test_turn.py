"""The turn pipeline's one failure path, and a turn that keeps its answer whatever
happens after the checks (no model is loaded here: the test embedder)."""

from __future__ import annotations

import pytest
import structlog
from structlog.testing import capture_logs

from bot.answer.compose import ExtractiveComposer
from bot.answer.record import failure_text
from bot.answer.turn import Answerer, failed_turn
from bot.memory.state import InProcessState, PriorTurn
from bot.slack.delivery import failure_notice
from search.embedded import EmbeddedStore
from search.errors import SearchBackendError, StoreError
from search.glossary import Glossary
from search.retrieve import Retriever

QUESTION = "How often does the Release Train leave?"


class StateThatCannotWrite(InProcessState):
    """Reads work, writes fail: Redis going away between the start and the end of a turn."""

    def append(self, thread_key: str, turn: PriorTurn) -> None:
        raise StoreError("cannot remember the turn in its thread in Redis (Connection refused); "
                         "check REDIS_URL and that Redis is up")


@pytest.fixture()
def answerer(small_store, test_embedder):
    def build(state=None, turnlog=None) -> Answerer:
        retriever = Retriever(small_store, test_embedder.encode_query, Glossary.empty())
        return Answerer(retriever, ExtractiveComposer(test_embedder.encode_texts),
                        turnlog or small_store, state or InProcessState())
    return build


class StoreWithoutWindowScores(EmbeddedStore):
    """Elasticsearch failing the one read of the passages' window vectors."""

    def window_scores(self, vector, chunk_ids):
        raise SearchBackendError("reading window vectors failed: ConnectionTimeout")


def test_a_failed_window_read_still_answers_from_the_passages_and_says_so(small_store, test_embedder):
    store = StoreWithoutWindowScores(small_store.directory)
    retriever = Retriever(store, test_embedder.encode_query, Glossary.empty())
    answerer = Answerer(retriever, ExtractiveComposer(test_embedder.encode_texts), store, InProcessState())
    record = answerer.ask(QUESTION)
    assert record.error is None and not record.refused
    assert record.quotes and all(q["verified"] for q in record.quotes)
    assert any("window scores read failed" in e and "ConnectionTimeout" in e for e in record.errors)
    healthy = Answerer(Retriever(small_store, test_embedder.encode_query, Glossary.empty()),
                       ExtractiveComposer(test_embedder.encode_texts), small_store, InProcessState())
    assert healthy.ask(QUESTION).errors == []  # the same turn with the read working
    store.close()


def test_a_failed_state_write_after_the_checks_keeps_the_checked_answer(answerer, small_store):
    record = answerer(StateThatCannotWrite()).ask(QUESTION, thread_key="C1:1.0")
    assert record.error is None and not record.refused
    assert record.answer.startswith("The collection says:")
    assert record.quotes and all(q["verified"] for q in record.quotes)
    assert any("conversation state write failed" in e for e in record.errors)
    assert small_store.get_turn(record.turn_id)["answer"] == record.answer  # logged as shown


class BrokenTurnLog:
    def put_turn(self, *_a) -> None:
        raise StoreError("cannot write turn in Redis (down)")

    def get_turn(self, _turn_id: str) -> None:
        return None

    def add_feedback(self, *_a) -> None:
        raise StoreError("down")


def test_a_failed_turn_log_write_keeps_the_answer_too(answerer):
    record = answerer(turnlog=BrokenTurnLog()).ask(QUESTION)
    assert record.error is None and record.answer.startswith("The collection says:")
    assert any("turn log write failed" in e for e in record.errors)


def test_one_failure_path_and_one_message_wherever_a_turn_fails(tmp_path, answerer):
    empty = EmbeddedStore(tmp_path / "empty")

    def encoder_down(_question: str):
        raise StoreError("the embedding model is unavailable")

    # inside the pipeline: the dense arm fails
    inside = Answerer(Retriever(empty, encoder_down, Glossary.empty()), None, empty,
                      InProcessState()).ask(QUESTION, turn_id="t-000000000001")
    # before the pipeline could be built: the Slack adapter records the same way
    exc = StoreError("the store is empty: run `citebot ingest PATH` first")
    before = failed_turn(empty, QUESTION, exc, turn_id="t-000000000002", surface="slack_mention")
    assert inside.error and inside.answer == failure_text(StoreError(inside.error), inside.turn_id)
    assert before.answer == failure_text(exc, "t-000000000002") == (
        "Sorry — I could not answer this: the store is empty: run `citebot ingest PATH` first "
        "(turn t-000000000002)")
    assert empty.get_turn("t-000000000002")["error"] == str(exc)
    assert empty.get_turn("t-000000000001")["error"] == inside.error
    # a bug (not a CitebotError) is said without its details, and logged with its trace
    bug = ZeroDivisionError("division by zero")
    with capture_logs(processors=[structlog.processors.format_exc_info]) as logs:
        crashed = failed_turn(empty, QUESTION, bug, turn_id="t-000000000003")
    assert crashed.answer == "Sorry — something went wrong while answering (turn t-000000000003)."
    assert crashed.error == "ZeroDivisionError: division by zero"
    (failed,) = [e for e in logs if e["event"] == "turn_failed"]
    assert "ZeroDivisionError" in failed["exception"]
    # Slack shows the same words
    assert failure_notice(bug, "t-000000000003").text.startswith(
        "Sorry — something went wrong while answering (turn `t-000000000003`).")
