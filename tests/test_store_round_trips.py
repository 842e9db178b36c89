"""Fewer round trips per retrieval, the same answers (real Elasticsearch and the embedded store).

The document frequencies, the chunk count and the lexical arm's phrase probes are read
together (`term_stats`: one `_msearch` on Elasticsearch), and the arms' reads bring the
chunks of their hits along (`dense`/`lexical` with `chunks`), so fusion reads none again
(docs/decisions/0054-fewer-elastic-round-trips.md). What is pinned here: the combined read
answers as the separate ones do, under every scope and after a re-ingest; the chunks the
arms bring are the scope's own and the same as get_chunks reads; and a hybrid retrieval on
Elasticsearch sends three requests, none of them a chunk fetch or a count of its own.
"""

from __future__ import annotations

import threading

import pytest

from search.glossary import Glossary
from search.retrieve import Retriever
from search.scope import Scope
from search.types import LexicalQuery, WeightedTerms
from tests.test_scope_contract import (  # noqa: F401 - store: the scoped collection's fixture
    NOT_PEOPLE,
    PEOPLE,
    PEOPLE_ONLY,
    SITE_ONLY,
    fixed_vector,
    store,
)
from tests.test_store_contract import (  # noqa: F401 - fixtures
    ALL_DOCS,
    E1,
    STAMP,
    backend,
    es_alias,
    es_url,
    make_doc,
    unit,
)

SCOPES = [None, SITE_ONLY, NOT_PEOPLE, PEOPLE_ONLY, Scope(())]
TERMS = ["brandvold", "bollard", "kettle", "nowhere", "kettle"]


@pytest.mark.parametrize("scope", SCOPES, ids=["all", "site", "not-people", "people", "nothing"])
def test_term_stats_are_the_document_frequencies_and_the_count(store, scope):  # noqa: F811
    dfs, count = store.term_stats(TERMS, scope=scope)
    assert dfs == store.doc_freqs(TERMS, scope=scope)
    assert list(dfs) == ["brandvold", "bollard", "kettle", "nowhere"] and dfs["nowhere"] == 0
    assert count == store.chunk_count(scope=scope)
    assert store.term_stats([], scope=scope) == ({}, count)
    if scope is None:
        assert (dfs["brandvold"], count) == (2, 12)


def test_term_stats_see_a_reingest_at_once(backend):  # noqa: F811 - the imported fixture, used
    """Nothing is remembered between questions: an ingest committed beside a reader
    changes its next count (a stale count would be a wrong gate decision)."""
    writer = backend.open()
    writer.open_for(STAMP)
    for doc, chunks, windows in ALL_DOCS:
        writer.replace_document(doc, chunks, windows)
    writer.commit_ingest()
    reader = backend.open()
    assert reader.term_stats(["brandvold"]) == ({"brandvold": 0}, 10)
    assert reader.term_stats(["brandvold"], scope=PEOPLE_ONLY) == ({"brandvold": 0}, 0)

    again = backend.open()
    again.open_for(STAMP)
    again.replace_document(*PEOPLE)
    again.commit_ingest()
    assert reader.term_stats(["brandvold"]) == ({"brandvold": 2}, 12)
    assert reader.term_stats(["brandvold"], scope=PEOPLE_ONLY) == ({"brandvold": 2}, 2)
    again.delete_documents(["people/reviews.md"])
    again.commit_ingest()
    assert reader.term_stats(["brandvold"]) == ({"brandvold": 0}, 10)


@pytest.mark.parametrize("scope", SCOPES, ids=["all", "site", "not-people", "people", "nothing"])
def test_the_chunks_the_arms_bring_are_the_scopes_and_as_get_chunks_reads_them(store, backend, scope):  # noqa: F811
    bollard = LexicalQuery((WeightedTerms(("kettle", "bollard", "brandvold", "review")),))
    for arm, ask in (("dense", lambda c: store.dense(E1, 10, scope=scope, chunks=c)),
                     ("lexical", lambda c: store.lexical(bollard, 10, scope=scope, chunks=c))):
        brought: dict = {}
        ranked = [cid for cid, _ in ask(brought)]
        assert ranked == [cid for cid, _ in ask(None)], arm  # the ranking does not change
        assert set(brought) <= set(ranked), arm
        assert all(scope is None or scope.allows(c.source) for c in brought.values()), arm
        assert list(brought.values()) == store.get_chunks(list(brought)), arm
        if backend.name == "elasticsearch" or arm == "lexical":
            assert set(brought) == set(ranked), f"{arm}: every hit's chunk comes with it"
        else:
            assert brought == {}, f"{arm}: the embedded store's dense arm leaves them to get_chunks"


def test_a_hybrid_retrieval_on_elasticsearch_is_three_requests(store, backend):  # noqa: F811
    """Watched on the real client (nothing is answered for Elasticsearch): the document
    frequencies with the count and the phrase and rare-name probes, the dense arm, BM25; no
    `_count`, no probes of their own, no fetch of the candidates' chunks. Under a scope the
    same, and only allowed chunks return."""
    # (a chunk fetch is a `_search` with an ids query; a count of its own, `_count`)
    if backend.name != "elasticsearch":  # no requests to watch: the same hits, read whole
        found = Retriever(store, fixed_vector, Glossary.empty()).retrieve("kettle bollard", scope=SITE_ONLY)
        assert found.hits and {h.chunk.source for h in found.hits} == {"site/annex.txt"}
        assert [h.chunk for h in found.hits] == store.get_chunks([h.chunk.chunk_id for h in found.hits])
        return
    sent: list[tuple[str, str]] = []
    lock = threading.Lock()
    perform = store.es.perform_request

    def watched(method, path, **kw):
        with lock:
            sent.append((method, path.split("?")[0].rsplit("/", 1)[-1]))
        return perform(method, path, **kw)

    store.es.perform_request = watched
    retriever = Retriever(store, fixed_vector, Glossary.empty())
    question = "What did Oskar Brandvold say about the quarterly salary review?"
    # Outside the people page "oskar" and "brandvold" are absent: the typo fixer asks for
    # spelling candidates (a term suggester) and counts them under the scope, two more.
    for scope, msearches, searches in ((NOT_PEOPLE, 3, 2), (PEOPLE_ONLY, 2, 1), (None, 2, 1)):
        retriever.retrieve(question, scope=scope)  # the calibration is read once, first
        sent.clear()
        found = retriever.retrieve(question, scope=scope)
        assert sorted(sent) == [("POST", "_msearch")] * msearches + [("POST", "_search")] * searches, scope
        assert found.hits and all(scope is None or scope.allows(h.chunk.source) for h in found.hits)
        assert [h.chunk for h in found.hits] == store.get_chunks([h.chunk.chunk_id for h in found.hits])
    assert found.hits[0].chunk.source == "people/reviews.md" and "rare:brandvold" in found.addresses

    # A typo: the words' counts with the chunk count, the spelling candidates, the fix's
    # count (read once: the rare-name rule takes the fixer's instead of reading it again),
    # the dense arm, BM25; no phrase to probe.
    sent.clear()
    fixed = retriever.retrieve("what about brandvoldt?")
    assert fixed.corrections == {"brandvoldt": "brandvold"}
    assert sorted(sent) == [("POST", "_msearch")] * 3 + [("POST", "_search")] * 2


@pytest.mark.parametrize("scope", SCOPES, ids=["all", "site", "not-people", "people", "nothing"])
def test_probes_answered_with_the_counts_are_phrase_matches_many(store, backend, scope):  # noqa: F811
    probes = [("salary", "review"), ("brandvold",), ("kettle",), ("no", "such", "phrase"), ("salary", "review")]
    held: dict = {}
    assert store.term_stats(TERMS, scope=scope, probes=probes, limit=1, held=held) == store.term_stats(
        TERMS, scope=scope
    )
    if backend.name == "elasticsearch":
        asked = list(dict.fromkeys(probes))
        assert held == dict(zip(asked, store.phrase_matches_many(asked, 1, scope=scope), strict=True))
    else:
        assert held == {}, "the embedded store probes later, only what can match"
