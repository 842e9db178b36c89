"""The Elasticsearch store's reads for retrieval: the dense and lexical arms, phrases,
document frequencies, spelling candidates and the vocabulary (a mixin of
search.elastic.store.ElasticStore, which provides the client, the alias and `_search`).

What each costs per question, so that it does not grow with the collection:

- Lexical: one request scored by Elasticsearch's own BM25 (mapping.py's SIMILARITY, with
  FTS5's k1 and b) over citebot's own tokens, size k; nothing per question aggregates the whole
  collection. Elasticsearch's ranking is not FTS5's (idf ln(1 + (N-n+.5)/(n+.5)), lengths
  in one byte, BM25F's weighted lengths), so the two stores agree on quality, not on every
  rank (benchmarks/quality.py measures it; the figures are in
  docs/decisions/0018-elasticsearch-bm25.md and docs/evaluation.md).
- More than one primary shard: the lexical request is dfs_query_then_fetch, so a term's
  BM25 statistics are the whole index's; on one shard Elasticsearch runs it as
  query_then_fetch (no extra round trip). Exact phrases keep each shard's own statistics:
  the dfs phase does not carry them for phrase queries (tests/test_elastic.py measures
  it), which approaches the exact figure as shards fill with thousands of chunks.
- Phrases, rare terms and document frequencies: one `_msearch` per batch, never one
  request per n-gram. The document frequencies and the chunk count are one search of it:
  the chunks counted, and each term of `vocab` a bucket of one `filters` aggregation
  (one search where there was one per term: docs/decisions/0062-elastic-analysis-in-one-search.md).
- Spelling: a term suggester over `vocab` for the words absent from the collection;
  the whole vocabulary is never read at question time (`vocabulary()` still reads it,
  for tools and tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from elasticsearch import BadRequestError

from search.elastic.mapping import _CHUNK_FIELDS, _chunk
from search.errors import CitebotError, DimensionError, SearchBackendError
from search.scope import Scope, glob_lucene, limiting
from search.text import query_stems, words
from search.types import Chunk, LexicalQuery, ModelStamp, WindowScore

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from elasticsearch import Elasticsearch

# The heading path counts for half a text match, as in the embedded store (HEADING_WEIGHT
# there).
HEADING_BOOST = 0.5
# Exact BM25 statistics over all shards; a one-shard index skips the dfs round trip.
LEXICAL_SEARCH_TYPE = "dfs_query_then_fetch"
# The typo fixer (search/retrieve.py) fixes a word by at most 2 edits; the suggester
# returns at most this many candidates per word (the fixer then picks the closest, ties
# alphabetically).
SPELLING_MAX_EDITS = 2
SPELLING_SUGGESTIONS = 50

# num_candidates = max(k * NUM_CANDIDATES_FACTOR, NUM_CANDIDATES_MIN), at most 10,000: 400
# for k = 30 reaches the exact scan's recall@30, so both stores' dense arms agree
# (docs/decisions/0017-knn-tuning.md).
NUM_CANDIDATES_FACTOR = 10
NUM_CANDIDATES_MIN = 400
NUM_CANDIDATES_MAX = 10_000

# Composite aggregation page for the vocabulary.
VOCAB_PAGE = 10_000


class ElasticQueries:
    """Retrieval reads over the alias; `self._search` and `self.stamp` come from ElasticStore."""

    # Set by ElasticStore.__init__; declared for the type checker.
    es: Elasticsearch
    alias: str
    url: str

    if TYPE_CHECKING:  # ElasticStore's methods the queries call

        def _search(
            self, doing: str, error: type[CitebotError] = SearchBackendError, **body: Any
        ) -> dict[str, Any]: ...

        def _calls(self, doing: str, error: type[CitebotError] = ...) -> AbstractContextManager[None]: ...

        def stamp(self) -> ModelStamp | None: ...

    def dense(
        self, vector: np.ndarray, k: int, *, scope: Scope | None = None, chunks: dict[str, Chunk] | None = None
    ) -> list[tuple[str, float]]:
        """The k nearest chunks; with `chunks`, their chunks come in the same response
        (docs/decisions/0054-fewer-elastic-round-trips.md)."""
        if k <= 0:
            return []
        knn: dict[str, Any] = {
            "field": "windows.vector",
            "query_vector": np.asarray(vector, np.float32).tolist(),
            "k": k,
            "num_candidates": num_candidates(k),
        }
        scoped = scope_filter(scope)
        if scoped is not None:
            knn["filter"] = scoped  # a pre-filter: the k nearest chunks inside the scope
        try:
            res = self._search("searching vectors", knn=knn, size=k, source=_source_for(chunks))
        except SearchBackendError as exc:
            # The width is checked only when Elasticsearch refuses the query: no extra
            # round trip per question.
            stamp = self.stamp() if isinstance(exc.__cause__, BadRequestError) else None
            if stamp is not None and vector.shape != (stamp.dims,):
                raise DimensionError(f"query vector has width {vector.shape}, the store holds {stamp.dims}") from exc
            raise
        _keep_chunks(res, chunks)
        # Cosine similarity is served as (1 + cos) / 2; the store protocol speaks cosine.
        return [(h["_id"], 2.0 * float(h["_score"]) - 1.0) for h in res["hits"]["hits"]]

    def window_scores(self, vector: np.ndarray, chunk_ids: Sequence[str]) -> dict[str, list[WindowScore]]:
        if not chunk_ids:
            return {}
        # The windows' own vectors (float HNSW keeps them exact), scored here as the
        # embedded store scores them: a few chunks' windows, ~4 KB of JSON each.
        res = self._search(
            "reading window vectors",
            query={"ids": {"values": list(chunk_ids)}},
            size=len(chunk_ids),
            source={"includes": ["windows"], "exclude_vectors": False},
        )
        q = np.asarray(vector, np.float32)
        out: dict[str, list[WindowScore]] = {}
        for h in res["hits"]["hits"]:
            windows = sorted(h["_source"].get("windows") or (), key=lambda w: w["index"])
            if not windows:
                continue
            matrix = np.asarray([w["vector"] for w in windows], dtype=np.float32)
            if q.shape != (matrix.shape[1],):
                raise DimensionError(f"query vector has width {q.shape}, the store holds {matrix.shape[1]}")
            out[h["_id"]] = [
                WindowScore(int(w["start"]), int(w["end"]), float(s)) for w, s in zip(windows, matrix @ q, strict=True)
            ]
        return out

    def _msearch(
        self, doing: str, searches: Sequence[dict[str, Any]], search_type: str | None = None
    ) -> list[dict[str, Any]]:
        """Several searches of the alias in one round trip (`_msearch`); one response each,
        in order. A missing alias answers empty; any other failed search fails the call."""
        if not searches:
            return []
        header: dict[str, Any] = {"index": self.alias}
        if search_type:
            header["search_type"] = search_type
        body: list[dict[str, Any]] = []
        for search in searches:
            body += [header, search]
        with self._calls(doing, SearchBackendError):
            responses = self.es.msearch(searches=body).body["responses"]
        out = []
        for r in responses:
            err = r.get("error")
            if err is not None:
                if isinstance(err, dict) and err.get("type") == "index_not_found_exception":
                    out.append({"hits": {"hits": [], "total": {"value": 0}}})
                    continue
                root = (err.get("root_cause") or [err])[0] if isinstance(err, dict) else {}
                raise SearchBackendError(
                    f"Elasticsearch at {self.url} answered {r.get('status')} while {doing}: "
                    f"{root.get('type')}: {root.get('reason')}"
                )
            out.append(r)
        return out

    def lexical(
        self, query: LexicalQuery, k: int, *, scope: Scope | None = None, chunks: dict[str, Chunk] | None = None
    ) -> list[tuple[str, float]]:
        """Elasticsearch's own BM25 (k1, b as FTS5's; see mapping.SIMILARITY) over citebot's tokens:
        each group's terms in text and heading (_group_clauses) at the group's weight (a
        stemmed group's stems in the stemmed fields), the
        query's phrases in the text. One request; nothing is re-scored. With `chunks`, the
        hits' chunks come in the same response."""
        should: list[dict[str, Any]] = []
        for group in query.groups:
            if group.stemmed:
                clauses = _group_clauses([tuple(query_stems(t)) for t in group.terms], "stems", "heading_stems")
            else:
                clauses = _group_clauses([tuple(words(t)) for t in group.terms])
            if clauses:
                should.append({"bool": {"should": clauses, "boost": group.weight}})
        for phrase, weight in query.phrases:
            tokens = words(phrase)
            if tokens:
                should.append(_phrase_clause("words", tokens, weight))
        if not should or k <= 0:
            return []
        found: dict[str, Any] = {"bool": {"should": should, "minimum_should_match": 1}}
        scoped = scope_filter(scope)
        if scoped is not None:
            found["bool"]["filter"] = [scoped]
        (res,) = self._msearch(
            "searching words",
            [{"query": found, "size": k, "_source": _source_for(chunks), "track_total_hits": False}],
            search_type=LEXICAL_SEARCH_TYPE,
        )
        _keep_chunks(res, chunks)
        return [(h["_id"], float(h["_score"])) for h in res["hits"]["hits"]]

    def phrase_matches(self, phrase: Sequence[str], limit: int, *, scope: Scope | None = None) -> list[str]:
        return self.phrase_matches_many([phrase], limit, scope=scope)[0]

    def phrase_matches_many(
        self, phrases: Sequence[Sequence[str]], limit: int, *, scope: Scope | None = None
    ) -> list[list[str]]:
        """phrase_matches for each phrase, in one request. Unscored and in index order
        (sort by _doc), so a phrase held by thousands of chunks stops at limit + 1: up to
        TOP_HITS_MAX, each phrase a bucket of one search; past it, one `_msearch`."""
        if limit + 1 <= TOP_HITS_MAX:
            tokens = [words(" ".join(p)) for p in phrases]
            (response,) = self._msearch("searching phrases", [_probe_search((), tokens, limit, scope)])
            return _probe_answers(tokens, response)
        tokens, searches = self._phrase_searches(phrases, limit, scope)
        return self._phrase_answers(tokens, self._msearch("searching phrases", searches))

    def _phrase_searches(
        self, phrases: Sequence[Sequence[str]], limit: int, scope: Scope | None
    ) -> tuple[list[list[str]], list[dict[str, Any]]]:
        """Each phrase's tokens, and a search for each phrase that has any."""
        tokens = [words(" ".join(p)) for p in phrases]
        scoped = scope_filter(scope)
        searches = []
        for t in tokens:
            if not t:
                continue
            query = _phrase_clause("words", t, 1.0)
            if scoped is not None:
                query = {"bool": {"filter": [query, scoped]}}
            searches.append(
                {"query": query, "size": limit + 1, "_source": False, "sort": ["_doc"], "track_total_hits": False}
            )
        return tokens, searches

    @staticmethod
    def _phrase_answers(tokens: list[list[str]], responses: Sequence[dict[str, Any]]) -> list[list[str]]:
        answers = iter(responses)
        return [[h["_id"] for h in next(answers)["hits"]["hits"]] if t else [] for t in tokens]

    def doc_freqs(self, terms: Sequence[str], *, scope: Scope | None = None) -> dict[str, int]:
        """Chunks holding each term in text or heading: a count of the `vocab` term per
        term, in one `_msearch`. Lucene keeps a term's document count in its term
        dictionary at index time, so an unscoped count is read, not counted (a segment
        with deleted documents is counted); a scope makes it a conjunction with the scope's
        sources. No aggregation over the collection."""
        if not terms:
            return {}
        wanted = sorted(set(terms))
        (response,) = self._msearch("counting document frequencies", [_freq_search(wanted, scope)])
        return _counted(terms, wanted, response)

    def term_stats(
        self,
        terms: Sequence[str],
        *,
        scope: Scope | None = None,
        probes: Sequence[Sequence[str]] = (),
        limit: int = 0,
        held: dict[tuple[str, ...], list[str]] | None = None,
    ) -> tuple[dict[str, int], int]:
        """doc_freqs and chunk_count (a total over the chunks of the scope, as `_count`
        gives it) in one search; with `held`, the probes' phrase matches too
        (phrase_matches_many's), in the same search up to TOP_HITS_MAX."""
        wanted = sorted(set(terms))
        asked = list(dict.fromkeys(tuple(p) for p in probes)) if held is not None else []
        inline = asked if limit + 1 <= TOP_HITS_MAX else []  # past it, phrase_matches_many's own searches
        tokens = [words(" ".join(p)) for p in inline]
        (response,) = self._msearch(
            "counting document frequencies and chunks", [_probe_search(wanted, tokens, limit, scope)]
        )
        if held is not None and asked:
            answers = (
                _probe_answers(tokens, response) if inline else self.phrase_matches_many(asked, limit, scope=scope)
            )
            held.update(zip(asked, answers, strict=True))
        return _counted(terms, wanted, response), int(response["hits"]["total"]["value"])

    def spelling_candidates(self, terms: Sequence[str], *, scope: Scope | None = None) -> dict[str, list[str]]:
        """Words of the collection within SPELLING_MAX_EDITS of each term, from Lucene's term
        dictionary of `vocab` (a term suggester per term, one request): the vocabulary is
        never read whole. Under a scope, only words some chunk of the scope holds."""
        wanted = [t for t in dict.fromkeys(terms) if t]
        if not wanted:
            return {}
        suggest = {
            f"t{i}": {
                "text": t,
                "term": {
                    "field": "vocab",
                    "suggest_mode": "always",
                    "max_edits": SPELLING_MAX_EDITS,
                    "prefix_length": 0,
                    "min_word_length": 1,
                    "size": SPELLING_SUGGESTIONS,
                    "accuracy": 0.1,
                    "string_distance": "levenshtein",
                },
            }
            for i, t in enumerate(wanted)
        }
        res = self._search("finding spelling candidates", size=0, suggest=suggest)
        out: dict[str, list[str]] = {}
        for i, t in enumerate(wanted):
            entries = res.get("suggest", {}).get(f"t{i}", [])
            out[t] = sorted({o["text"] for e in entries for o in e.get("options", [])} - {t})
        if limiting(scope) is not None:
            held = self.doc_freqs(sorted({c for cs in out.values() for c in cs}), scope=scope)
            out = {t: [c for c in cs if held.get(c, 0) > 0] for t, cs in out.items()}
        return out

    def vocabulary(self, *, scope: Scope | None = None) -> set[str]:
        vocab: set[str] = set()
        scoped: dict[str, Any] = {"query": _chunks(scope)} if limiting(scope) else {}
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {"size": VOCAB_PAGE, "sources": [{"term": {"terms": {"field": "vocab"}}}]}
            if after:
                composite["after"] = after
            res = self._search("reading the vocabulary", size=0, aggs={"vocab": {"composite": composite}}, **scoped)
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
    return {
        "bool": {
            "should": [{"regexp": {"source": {"value": glob_lucene(g), "flags": "NONE"}}} for g in scope.globs],
            "minimum_should_match": 1,
        }
    }


def _chunks(scope: Scope | None) -> dict[str, Any]:
    """Every chunk document, within the scope when there is one."""
    scoped = scope_filter(scope)
    if scoped is None:
        return {"term": {"kind": "chunk"}}
    return {"bool": {"filter": [{"term": {"kind": "chunk"}}, scoped]}}


# The most hits a `top_hits` aggregation returns (Elasticsearch's default
# index.max_inner_result_window); a phrase probe asked for more is a search of its own.
TOP_HITS_MAX = 100


def _freq_search(wanted: Sequence[str], scope: Scope | None) -> dict[str, Any]:
    """One search: the scope's chunks counted, and the chunks holding each wanted term in
    `vocab` (text or heading) counted as a bucket of a `filters` aggregation."""
    return _probe_search(wanted, [], 0, scope)


def _probe_search(
    wanted: Sequence[str], phrases: Sequence[Sequence[str]], limit: int, scope: Scope | None
) -> dict[str, Any]:
    """_freq_search, and for each phrase with tokens a `filter` bucket of the chunks
    holding it, its first limit + 1 in index order (`top_hits` sorted by _doc): the
    counts and every phrase probe of a question in one search (a search each made 1+8
    searches 6.1 ms p50, one 1.9 ms: docs/decisions/0062-elastic-analysis-in-one-search.md)."""
    aggs: dict[str, Any] = {}
    if wanted:
        aggs["df"] = {"filters": {"filters": {f"t{i}": {"term": {"vocab": t}} for i, t in enumerate(wanted)}}}
    for i, tokens in enumerate(phrases):
        if tokens:
            hits = {"size": limit + 1, "_source": False, "sort": ["_doc"]}
            aggs[f"p{i}"] = {"filter": _phrase_clause("words", tokens, 1.0), "aggs": {"ids": {"top_hits": hits}}}
    search: dict[str, Any] = {"query": _chunks(scope), "size": 0, "track_total_hits": True}
    if aggs:
        search["aggs"] = aggs
    return search


def _probe_answers(phrases: Sequence[Sequence[str]], response: dict[str, Any]) -> list[list[str]]:
    """Each phrase's chunk ids from the response of _probe_search (none where the alias has
    no index yet, or the phrase no tokens)."""
    aggs = response.get("aggregations", {})
    return [
        [h["_id"] for h in aggs[f"p{i}"]["ids"]["hits"]["hits"]] if f"p{i}" in aggs else [] for i in range(len(phrases))
    ]


def _counted(terms: Sequence[str], wanted: Sequence[str], response: dict[str, Any]) -> dict[str, int]:
    """Each term's count from the response of _freq_search(wanted), in the order and with
    the repeats of `terms` (none where the alias has no index yet)."""
    buckets = response.get("aggregations", {}).get("df", {}).get("buckets", {})
    found = {t: int(buckets[f"t{i}"]["doc_count"]) if f"t{i}" in buckets else 0 for i, t in enumerate(wanted)}
    return {t: found[t] for t in terms}


def _source_for(chunks: dict[str, Chunk] | None) -> list[str] | bool:
    """What a ranked read fetches: the chunks' fields when the caller keeps them, else nothing."""
    return list(_CHUNK_FIELDS) if chunks is not None else False


def _keep_chunks(res: dict[str, Any], chunks: dict[str, Chunk] | None) -> None:
    """The chunks of a response's hits into `chunks` (as get_chunks reads them)."""
    if chunks is None:
        return
    for h in res["hits"]["hits"]:
        src = h.get("_source") or {}
        if src.get("chunk_id"):
            chunks[h["_id"]] = _chunk(src)


def num_candidates(k: int) -> int:
    return min(NUM_CANDIDATES_MAX, max(k * NUM_CANDIDATES_FACTOR, NUM_CANDIDATES_MIN, k))


def _group_clauses(
    terms: Sequence[Sequence[str]], text_field: str = "words", heading_field: str = "heading"
) -> list[dict[str, Any]]:
    """One term group's clauses: each term (one token, or an exact phrase for several) in
    the text and, at HEADING_BOOST, in the heading path; BM25 scores summed, as FTS5 sums
    `"a" OR "b"`. Per-field clauses, not combined_fields (BM25F, closer to FTS5's row
    score): combined_fields takes its term statistics from each shard even under
    dfs_query_then_fetch, and on the labelled collections it ranked no better (lexical
    Recall@5, embedded / per-field / combined_fields: examples 0.839 / 0.821 / 0.839, git
    0.778 / 0.806 / 0.778, sqlite 0.745 / 0.766 / 0.681)."""
    clauses: list[dict[str, Any]] = []
    for t in dict.fromkeys(tuple(t) for t in terms if t):
        clauses.append(_phrase_clause(text_field, t, 1.0))
        clauses.append(_phrase_clause(heading_field, t, HEADING_BOOST))
    return clauses


def _phrase_clause(field: str, tokens: Sequence[str], boost: float) -> dict[str, Any]:
    tokens = list(tokens)
    if len(tokens) == 1:
        return {"term": {field: {"value": tokens[0], "boost": boost}}}
    return {"match_phrase": {field: {"query": " ".join(tokens), "boost": boost}}}
