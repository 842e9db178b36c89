"""The question's embedding and dense read run on a worker beside the analysis and the
lexical arm (search/dense_arm.py, docs/decisions/0052-overlapped-arms.md): on another
thread, at the same time as the caller's reads, every SQLite statement of either thread
under the store's lock, and every failure the caller's as when the arms ran in sequence."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from bot.testing.services import free_port
from search.elastic import ElasticStore, connect
from search.errors import SearchBackendError, StoreError
from search.glossary import Glossary
from search.retrieve import Retriever
from search.scope import Scope

QUESTION = "How many days of parental leave do I get?"


def test_the_question_is_embedded_on_a_worker_while_the_caller_reads_the_store(small_store, test_embedder):
    caller = threading.current_thread().name
    source = small_store.iter_chunks()[0].source
    scope = Scope((source.split("/")[0] + "/**",), "test")  # a real filter: citebot_in_scope in SQL
    assert scope.allows(source) and not scope.everything
    embedding = threading.Event()
    encoded_on: list[str] = []
    statements: list[tuple[str, bool, str]] = []  # thread, store lock held by it, statement
    waited: list[bool] = []

    def traced(statement: str) -> None:
        # Called by SQLite on the thread running the statement, before it runs.
        name = threading.current_thread().name
        statements.append((name, small_store._lock._is_owned(), statement))
        if name == caller and not waited:
            # The caller's first read waits until the encoder has begun: the two overlap
            # for certain, whatever the machine's load.
            waited.append(embedding.wait(30))

    def encode(text: str):
        encoded_on.append(threading.current_thread().name)
        embedding.set()
        return test_embedder.encode_query(text)

    small_store._db._db.set_trace_callback(traced)  # the sqlite3 connection behind the lock
    try:
        r = Retriever(small_store, encode, Glossary.empty()).retrieve(QUESTION, scope=scope)
    finally:
        small_store._db._db.set_trace_callback(None)
    assert waited == [True], "the encoder never began while the caller read the store"
    assert encoded_on and encoded_on[0].startswith("citebot-dense") and encoded_on[0] != caller
    assert r.hits and all(scope.allows(h.chunk.source) for h in r.hits)
    assert {"analyse", "embed", "dense", "dense_wait", "lexical", "fuse", "total"} <= set(r.timings_ms)
    # Both threads used the one connection, never without the store's lock.
    assert {name for name, _, _ in statements} >= {caller, encoded_on[0]}
    assert [s for s in statements if not s[1]] == []
    assert any("citebot_in_scope" in s for name, _, s in statements if name == caller)


def test_the_worker_runs_in_the_callers_context(small_store, test_embedder):
    turn = contextvars.ContextVar("turn", default=None)
    seen: list[str | None] = []

    def encode(text: str):
        seen.append(turn.get())
        return test_embedder.encode_query(text)

    turn.set("t-000000000042")
    Retriever(small_store, encode, Glossary.empty()).retrieve(QUESTION)
    assert seen == ["t-000000000042"]


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_a_failing_encoder_fails_the_retrieval_with_its_own_error(small_store, mode):
    calls: list[str] = []

    def encoder_down(text: str):
        calls.append(text)
        raise StoreError("the embedding model is unavailable")

    with pytest.raises(StoreError) as failed:
        Retriever(small_store, encoder_down, Glossary.empty()).retrieve(QUESTION, mode=mode)
    assert type(failed.value) is StoreError and str(failed.value) == "the embedding model is unavailable"
    assert calls == [QUESTION]  # run once, never again on the caller's thread

    def bug(text: str):
        return 1 / 0

    with pytest.raises(ZeroDivisionError, match="division by zero"):
        Retriever(small_store, bug, Glossary.empty()).retrieve(QUESTION, mode=mode)
    # The lexical mode embeds nothing, as before.
    assert Retriever(small_store, encoder_down, Glossary.empty()).retrieve(QUESTION, mode="lexical").hits
    assert calls == [QUESTION]


def test_a_failed_analysis_waits_for_the_worker_and_surfaces_as_before():
    """The search backend down: the analysis fails first, as when it ran before the dense
    arm, and the worker (here an encoder that fails slowly) has ended before the caller
    hears of it; nothing is left running."""
    store = ElasticStore(connect(f"http://127.0.0.1:{free_port()}", timeout_s=5), alias="citebot-overlap-down")
    ended = threading.Event()

    def slow_encoder_down(text: str):
        try:
            time.sleep(0.3)
            raise StoreError("the embedding model is unavailable")
        finally:
            ended.set()

    with pytest.raises(SearchBackendError, match="is unreachable while") as failed:
        Retriever(store, slow_encoder_down, Glossary.empty()).retrieve(QUESTION)
    assert ended.is_set(), "the retrieval failed while its worker was still running"
    assert "embedding model" not in str(failed.value)
