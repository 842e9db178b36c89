"""The Elasticsearch store's reads for retrieval: the dense and lexical arms, phrases,
document frequencies and the vocabulary (a mixin of search.elastic.ElasticStore, which
provides `_search`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from elasticsearch import BadRequestError

from search import bm25
from search.errors import DimensionError, SearchBackendError
from search.scope import Scope, glob_lucene, limiting
from search.text import words
from search.types import LexicalQuery

# Heading path against passage text, as in the embedded store (HEADING_WEIGHT there).
HEADING_BOOST = 0.5
TEXT_COLUMN = 0
COLUMN_WEIGHTS = (1.0, HEADING_BOOST)  # words, heading

# Passages the lexical query fetches (by Elasticsearch's own score) and re-ranks with
# FTS5's bm25. Measured by benchmarks/elastic_tuning.py --only lexical: the share of
# queries whose top 30 (ids, in order) equals the embedded store's, and p50 of one call:
#   candidates                     50      100     200     500
#   examples, 72 questions       0.833   1.000   1.000   1.000
#   python-doc, 20 questions     0.750   1.000   1.000   1.000   (p50 11/20/29/53 ms)
#   python-doc, 20 heading paths 0.150   0.350   0.650   0.800
# Questions agree from 100 on. Heading paths made of page furniture ("Table of Contents
# Next topic", every word in a quarter of the chunks, so FTS5's idf is near zero and
# thousands of chunks tie) keep gaining; 200 buys most of that for ~10 ms.
LEXICAL_CANDIDATES = 200

# num_candidates = max(k * NUM_CANDIDATES_FACTOR, NUM_CANDIDATES_MIN), at most 10,000.
# For the Retriever's k = 30 that is 400: recall@30 0.999 and recall@5 1.000 against
# exact search (table above), for ~1.5 ms more than 100 candidates. The embedded store
# searches exactly, so this is what keeps the two backends' dense arms alike.
NUM_CANDIDATES_FACTOR = 10
NUM_CANDIDATES_MIN = 400
NUM_CANDIDATES_MAX = 10_000

# Composite aggregation page for the vocabulary.
VOCAB_PAGE = 10_000


class ElasticQueries:
    """Retrieval reads over the alias; `self._search` and `self.stamp` come from ElasticStore."""

    def dense(self, vector: np.ndarray, k: int, *, scope: Scope | None = None) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        knn: dict[str, Any] = {
            "field": "windows.vector", "query_vector": np.asarray(vector, np.float32).tolist(),
            "k": k, "num_candidates": num_candidates(k),
        }
        scoped = scope_filter(scope)
        if scoped is not None:
            knn["filter"] = scoped  # a pre-filter: the k nearest chunks inside the scope
        try:
            res = self._search("searching vectors", knn=knn, size=k, source=False)
        except SearchBackendError as exc:
            # The width is checked only when Elasticsearch refuses the query: no extra
            # round trip per question.
            stamp = self.stamp() if isinstance(exc.__cause__, BadRequestError) else None
            if stamp is not None and vector.shape != (stamp.dims,):
                raise DimensionError(
                    f"query vector has width {vector.shape}, the store holds {stamp.dims}"
                ) from exc
            raise
        # Cosine similarity is served as (1 + cos) / 2; the store protocol speaks cosine.
        return [(h["_id"], 2.0 * float(h["_score"]) - 1.0) for h in res["hits"]["hits"]]

    def lexical(self, query: LexicalQuery, k: int, *, scope: Scope | None = None) -> list[tuple[str, float]]:
        """Candidates and exact statistics from Elasticsearch in one request, ranked by
        FTS5's bm25 (search/bm25.py) so both backends order passages alike."""
        parts: list[tuple[float, list[tuple[str, ...]], tuple[int, ...] | None]] = []
        for group in query.groups:
            phrases = [p for p in (tuple(words(t)) for t in group.terms) if p]
            if phrases:
                parts.append((group.weight, phrases, None))
        for phrase, weight in query.phrases:
            tokens = tuple(words(phrase))
            if tokens:
                parts.append((weight, [tokens], (TEXT_COLUMN,)))
        if not parts or k <= 0:
            return []
        keys: dict[tuple[tuple[str, ...], tuple[int, ...] | None], str] = {}
        should: list[dict[str, Any]] = []
        for weight, phrases, columns in parts:
            if columns is None:
                should.append({"bool": {"should": [
                    _any_of("words", phrases, 1.0), _any_of("heading", phrases, HEADING_BOOST),
                ], "boost": weight}})
            else:
                should.append(_any_of("words", phrases, weight))
            for p in phrases:
                keys.setdefault((p, columns), f"p{len(keys)}")
        scoped = scope_filter(scope)
        found: dict[str, Any] = {"bool": {"should": should}}
        if scoped is not None:
            found["bool"].update(filter=[scoped], minimum_should_match=1)
        res = self._search(
            "searching words", query=found, size=LEXICAL_CANDIDATES,
            source=False, stored_fields=["words", "heading"],
            docvalue_fields=["source", "ordinal"], track_total_hits=False,
            # Over the whole collection, whatever the query matched: N, mean length, and
            # the chunks holding each phrase. Not scoped: FTS5's bm25() in the embedded
            # store weighs terms over the whole collection too (see search/scope.py).
            aggs={"all": {"global": {}, "aggs": {"chunks": {
                "filter": {"term": {"kind": "chunk"}},
                "aggs": {"tokens": {"sum": {"field": "n_tokens"}}, "hits": {"filters": {
                    "filters": {key: _holding(p, cols) for (p, cols), key in keys.items()}}}},
            }}}},
        )
        hits = res["hits"]["hits"]
        if not hits:
            return []
        stats = res["aggregations"]["all"]["chunks"]
        rows = int(stats["doc_count"])
        avgdl = float(stats["tokens"]["value"]) / rows
        idfs = {key: bm25.idf(rows, int(b["doc_count"]))
                for key, b in stats["hits"]["buckets"].items()}
        scored: list[tuple[float, str, int, str]] = []
        for h in hits:
            fields = h.get("fields", {})
            row = bm25.Row(tuple(fields.get(f, [""])[0].split() for f in ("words", "heading")))
            total = 0.0
            matched = False
            for weight, phrases, columns in parts:
                part = bm25.score(
                    row, phrases, [idfs[keys[(p, columns)]] for p in phrases],
                    COLUMN_WEIGHTS, avgdl, columns,
                )
                if part is not None:
                    total += weight * part
                    matched = True
            if matched:
                scored.append((-total, fields["source"][0], int(fields["ordinal"][0]), h["_id"]))
        scored.sort()
        return [(chunk_id, -neg) for neg, _, _, chunk_id in scored[:k]]

    def phrase_matches(self, phrase: Sequence[str], limit: int, *,
                       scope: Scope | None = None) -> list[str]:
        text = " ".join(phrase)
        if not words(text):
            return []
        query = _phrase("words", text, 1.0)
        scoped = scope_filter(scope)
        if scoped is not None:
            query = {"bool": {"must": [query], "filter": [scoped]}}
        res = self._search("searching a phrase", query=query,
                           size=limit + 1, source=False, track_total_hits=False)
        return [h["_id"] for h in res["hits"]["hits"]]

    def doc_freqs(self, terms: Sequence[str], *, scope: Scope | None = None) -> dict[str, int]:
        if not terms:
            return {}
        wanted = sorted(set(terms))
        res = self._search(
            "counting document frequencies", size=0, query=_chunks(scope),
            aggs={"df": {"terms": {"field": "vocab", "include": wanted, "size": len(wanted)}}},
        )
        found = {b["key"]: int(b["doc_count"])
                 for b in res.get("aggregations", {}).get("df", {}).get("buckets", [])}
        return {t: found.get(t, 0) for t in terms}

    def vocabulary(self, *, scope: Scope | None = None) -> set[str]:
        vocab: set[str] = set()
        scoped: dict[str, Any] = {"query": _chunks(scope)} if limiting(scope) else {}
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": VOCAB_PAGE, "sources": [{"term": {"terms": {"field": "vocab"}}}],
            }
            if after:
                composite["after"] = after
            res = self._search("reading the vocabulary", size=0,
                               aggs={"vocab": {"composite": composite}}, **scoped)
            agg = res.get("aggregations", {}).get("vocab", {})
            vocab.update(b["key"]["term"] for b in agg.get("buckets", []))
            after = agg.get("after_key")
            if not after or len(agg.get("buckets", [])) < VOCAB_PAGE:
                return vocab


def scope_filter(scope: Scope | None) -> dict[str, Any] | None:
    """The scope as a filter clause over `source` (one regexp per glob), or None for all."""
    scope = limiting(scope)
    if scope is None:
        return None
    if not scope.globs:
        return {"bool": {"must_not": [{"match_all": {}}]}}
    return {"bool": {"should": [{"regexp": {"source": {"value": glob_lucene(g), "flags": "NONE"}}}
                                for g in scope.globs], "minimum_should_match": 1}}


def _chunks(scope: Scope | None) -> dict[str, Any]:
    """Every chunk document, within the scope when there is one."""
    scoped = scope_filter(scope)
    if scoped is None:
        return {"term": {"kind": "chunk"}}
    return {"bool": {"filter": [{"term": {"kind": "chunk"}}, scoped]}}


def num_candidates(k: int) -> int:
    return min(NUM_CANDIDATES_MAX, max(k * NUM_CANDIDATES_FACTOR, NUM_CANDIDATES_MIN, k))


def _any_of(field: str, terms: Sequence[str | Sequence[str]], boost: float) -> dict[str, Any]:
    """One BM25 clause per term, summed, as FTS5 sums `"a" OR "b"` (a term that cuts into
    several tokens is a phrase there and here). A term is a string or its tokens."""
    clauses = []
    for term in terms:
        tokens = words(term) if isinstance(term, str) else list(term)
        if len(tokens) == 1:
            clauses.append({"term": {field: tokens[0]}})
        elif tokens:
            clauses.append({"match_phrase": {field: " ".join(tokens)}})
    return {"bool": {"should": clauses, "boost": boost}}


def _holding(phrase: Sequence[str], columns: tuple[int, ...] | None) -> dict[str, Any]:
    """Chunks holding the phrase: in the text, or (columns None) in text or heading."""
    if columns is not None:
        return _any_of("words", [phrase], 1.0)
    return {"bool": {"should": [_any_of("words", [phrase], 1.0),
                                _any_of("heading", [phrase], 1.0)]}}


def _phrase(field: str, text: str, boost: float) -> dict[str, Any]:
    return {"match_phrase": {field: {"query": " ".join(words(text)), "boost": boost}}}
