"""The Elasticsearch store: the collection in a versioned index behind an alias.

    <alias>  ──▶  <alias>-v20250101120000123456   (complete; what readers search)
                  <alias>-v20250102090000654321   (being built by an ingest run)

Every ingest run that changes anything writes a NEW index and moves the alias to it in
one atomic `_aliases` call in commit_ingest(), so a reader never sees a half-built
collection. Documents the run did not touch are copied from the current index into the
new one at commit (point in time + search_after + bulk: this distribution has no
reindex module), and superseded indices are deleted. A fresh index also means BM25
statistics never count deleted documents.

Mapping, and the measurements behind it:

- Words. `words` and `heading` hold the passage's and the heading path's tokens as
  search/text.py cuts them, joined by spaces, indexed by the whitespace analyzer with
  positions (for phrases) and stored; `text` keeps the verbatim passage, not indexed.
  The standard analyzer was measured first: it tokenises 186 of the 367 sample chunks
  differently from SQLite's unicode61 ("customer’s" and "1.6" stay one token, so
  "customer" is missing from 61 chunks), and this distribution has no asciifolding or
  pattern tokenizer to close the gap. Cutting words once, in Python, for both backends
  makes document frequencies, phrases and the vocabulary agree by construction. No
  shingle subfield: phrase scores come from the formula below, not from Lucene, and a
  match_phrase lookup costs ~1 ms, nearly all of it the round trip.
- Lexical ranking. Elasticsearch finds the candidates (a bool query per term group and
  phrase) and, in the same request, the exact statistics (chunk count, token total,
  chunks holding each phrase); the candidates are then ranked by SQLite FTS5's bm25
  formula (search/bm25.py). Lucene's own BM25 (another idf, per-field lengths stored in
  one byte) gave the same top 5 as the embedded store for 43% of the 72 sample
  questions; this gives 100%. See LEXICAL_CANDIDATES.
- `vocab`: the distinct tokens of text and heading as a keyword array (doc values
  only). Document frequencies are a terms aggregation over it (exact: one primary shard
  by default, and `include` lists the terms); the vocabulary is a composite aggregation.
  No fielddata on text fields.
- Vectors: one document per chunk, its embedding windows as nested dense vectors;
  `knn` on the nested field scores a chunk by its best window (the protocol's rule) and
  returns k distinct chunks. One document per window collapsed to its chunk was
  measured beside it (benchmarks/elastic_tuning.py, 10,002 chunks, 20,832 windows, 40
  queries): recall@30 0.991 / 0.998 at 200 / 400 candidates against nested's 0.990 /
  0.999, recall@5 1.000 for both, p50 3.1-4.1 ms against 4.5-5.4 ms, 30.9 MB of
  vector files against 31.0. The measurement does not separate them; the structure
  does: per window needs k x (windows per chunk) hits before the collapse (a guess: 4
  here) and documents that are not chunks, which every count, BM25 statistic and
  lookup would have to filter out; nested keeps words, counts and vectors of a chunk on
  one document, written and replaced together. Cosine, HNSW: see INDEX_OPTIONS.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
from elastic_transport import TlsError
from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    BadRequestError,
    Elasticsearch,
    NotFoundError,
    TransportError,
)
from elasticsearch.helpers import BulkIndexError, streaming_bulk

from search import bm25
from search.errors import (
    CitebotError,
    DimensionError,
    ModelMismatchError,
    SearchBackendError,
    StoreError,
)
from search.scope import Scope, glob_lucene, limiting
from search.text import words
from search.types import Chunk, DocumentRecord, LexicalQuery, ModelStamp, Window

# Version of the index layout below; an index of another format is refused on open.
# 2: chunks carry `superseded` (their document says it no longer holds). Fields added
# since are optional and keep the format, so a citebot of either side reads the other's
# index (a server not yet upgraded keeps serving): `url` and `anchor` (search/links.py; a
# chunk without them has no link of its own). An older ingest cannot copy chunks that
# carry them into its strict mapping: after a downgrade, re-ingest into a new CITEBOT_INDEX.
INDEX_FORMAT = 2

# One primary shard: BM25 statistics and document counts are exact (no dfs round
# trip), and a 10,000-chunk collection is a few hundred megabytes, far from the size
# where a shard needs splitting. Replicas follow the cluster: 0 on one node, 1 beyond.
INDEX_SETTINGS: dict[str, Any] = {
    "number_of_shards": 1,
    "auto_expand_replicas": "0-1",
    "refresh_interval": "-1",  # during the build; reset at commit
}

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

# Vectors: float HNSW (m 16, ef_construction 100), not this version's default bbq_hnsw
# nor int8_hnsw. Measured by benchmarks/elastic_tuning.py on the 10,002-chunk corpus
# (20,832 windows), 40 queries, recall against the exact scan, k = 30:
#   num_candidates           30     60    100    200    400
#   hnsw       recall@30   0.932  0.978  0.984  0.990  0.999   p50 3.6-5.4 ms
#   int8_hnsw  recall@30   0.927  0.966  0.972  0.976  0.982
#   bbq_hnsw   recall@30   0.946  0.968  0.968  0.977  0.977
# Quantised vectors plateau below exact (their scores are approximate) and are not
# faster at this size; vector files take 31.0 MB (hnsw), 38.7 (int8: floats kept too)
# and 32.2 (bbq). Float is the "or better" choice until a collection has millions of
# windows.
INDEX_OPTIONS: dict[str, Any] = {"type": "hnsw", "m": 16, "ef_construction": 100}

# num_candidates = max(k * NUM_CANDIDATES_FACTOR, NUM_CANDIDATES_MIN), at most 10,000.
# For the Retriever's k = 30 that is 400: recall@30 0.999 and recall@5 1.000 against
# exact search (table above), for ~1.5 ms more than 100 candidates. The embedded store
# searches exactly, so this is what keeps the two backends' dense arms alike.
NUM_CANDIDATES_FACTOR = 10
NUM_CANDIDATES_MIN = 400
NUM_CANDIDATES_MAX = 10_000

# Bulk requests: 200 chunk documents with their nested vectors are ~1.5 MB; 429s
# (the cluster is busy) are retried with exponential backoff.
BULK_CHUNK_DOCS = 200
BULK_MAX_BYTES = 10 * 1024 * 1024
BULK_MAX_RETRIES = 5
BULK_INITIAL_BACKOFF_S = 1.0
BULK_MAX_BACKOFF_S = 30.0
# Transport-level retries of one request (connection errors, timeouts, 502-504).
REQUEST_MAX_RETRIES = 3
# Page size when reading a whole index (iter_chunks, copying documents at commit).
PAGE_SIZE = 500
# A build index left behind by a crashed ingest is deleted by a later commit once it
# is older than this; younger ones may belong to an ingest still running elsewhere.
STALE_BUILD_S = 6 * 3600
# The whitespace tokenizer cuts tokens longer than this; the vocabulary leaves them out.
MAX_TOKEN_CHARS = 255
# Composite aggregation page for the vocabulary.
VOCAB_PAGE = 10_000

_CHUNK_FIELDS = [
    "chunk_id", "doc_id", "source", "heading_path", "page", "ordinal", "text", "tokens",
    "overlap_prev", "overlap_next", "superseded", "url", "anchor",
]


def mapping_for(stamp: ModelStamp, state: str) -> dict[str, Any]:
    """The index mapping; the model stamp and the build state live in its _meta."""
    kw = {"type": "keyword"}
    stored = {"type": "keyword", "index": False, "doc_values": False}
    number = {"type": "integer", "index": False}
    # Stored apart from _source: the lexical arm reads them for its candidates. Measured
    # on the sample collection, 72 questions, 500 candidates: Elasticsearch took a
    # median 35 ms filtering _source, 4-11 ms reading stored fields.
    words_field = {"type": "text", "analyzer": "whitespace", "index_options": "positions",
                   "store": True}
    return {
        "dynamic": "strict",
        "_meta": {
            "citebot": {
                "format": INDEX_FORMAT, "state": state,
                "model": {"name": stamp.name, "dims": stamp.dims, "checksum": stamp.checksum},
            }
        },
        "properties": {
            "kind": kw,  # "chunk" or "document"
            "doc_id": kw, "source": kw, "chunk_id": kw,
            "ordinal": {"type": "integer"},
            "heading_path": stored, "page": stored,
            "text": {"type": "text", "index": False},
            "tokens": number, "overlap_prev": number, "overlap_next": number,
            "superseded": {"type": "boolean", "index": False},
            "url": stored, "anchor": stored,
            "n_tokens": {"type": "integer", "index": False},  # words + heading tokens
            "words": words_field, "heading": words_field,
            "vocab": {"type": "keyword", "index": False, "ignore_above": MAX_TOKEN_CHARS},
            "windows": {
                "type": "nested",
                "properties": {
                    "index": number, "start": number, "end": number,
                    "vector": {
                        "type": "dense_vector", "dims": stamp.dims, "similarity": "cosine",
                        "index_options": INDEX_OPTIONS,
                    },
                },
            },
            "content_hash": stored, "title": stored, "format": stored,
        },
    }


def connect(
    url: str,
    *,
    api_key: str | None = None,
    username: str | None = None,
    password: str | None = None,
    ca_certs: str | None = None,
    timeout_s: float = 30.0,
) -> Elasticsearch:
    """A client for one cluster; nothing is sent until the first request."""
    if (username is None) != (password is None):
        raise StoreError(
            "CITEBOT_ES_USERNAME and CITEBOT_ES_PASSWORD go together: set both or neither"
        )
    options: dict[str, Any] = {
        "request_timeout": timeout_s,
        "max_retries": REQUEST_MAX_RETRIES,
        "retry_on_timeout": True,
        "retry_on_status": (502, 503, 504),
    }
    if api_key:
        options["api_key"] = api_key
    if username is not None and password is not None:
        options["basic_auth"] = (username, password)
    if ca_certs:
        options["ca_certs"] = ca_certs
    try:
        return Elasticsearch(url, **options)
    except ValueError as exc:  # a malformed URL
        raise StoreError(f"cannot use CITEBOT_ES_URL={url!r}: {exc}") from exc


def _index_version() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")


class ElasticStore:
    """The store protocol over one Elasticsearch alias (see the module docstring)."""

    def __init__(self, client: Elasticsearch, alias: str = "citebot") -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", alias):
            raise StoreError(
                f"CITEBOT_INDEX={alias!r} is not a usable Elasticsearch alias: use lower-case "
                "letters, digits, '-', '_' or '.', starting with a letter or digit"
            )
        self.es = client
        self.alias = alias
        nodes = client.transport.node_pool.all()
        self.url = ", ".join(str(n.base_url) for n in nodes) or "(no node)"
        self._versioned = re.compile(re.escape(alias) + r"-v\d{20}")
        self._bound: ModelStamp | None = None
        # The ingest run in progress: its index and what it wrote or deleted.
        self._build: str | None = None
        self._written: dict[str, list[str]] = {}  # source -> _ids written to the build
        self._deleted: set[str] = set()

    # -- errors ---------------------------------------------------------------------------
    @contextmanager
    def _calls(self, doing: str, error: type[CitebotError] = StoreError) -> Iterator[None]:
        """Turn client errors into citebot errors that say what to fix."""
        try:
            yield
        except BulkIndexError as exc:
            raise error(
                f"Elasticsearch at {self.url} refused {len(exc.errors)} document(s) while "
                f"{doing}; first: {_bulk_reason(exc.errors[0] if exc.errors else {})}"
            ) from exc
        except AuthenticationException as exc:
            raise error(
                f"Elasticsearch at {self.url} rejected the credentials while {doing}: set "
                "CITEBOT_ES_API_KEY, or CITEBOT_ES_USERNAME and CITEBOT_ES_PASSWORD"
            ) from exc
        except AuthorizationException as exc:
            raise error(
                f"Elasticsearch at {self.url} refused {doing} for lack of privileges: the "
                f"user needs read, write and manage on {self.alias} and {self.alias}-v*"
            ) from exc
        except ApiError as exc:
            raise error(
                f"Elasticsearch at {self.url} answered {exc.meta.status} while {doing}: "
                f"{_reason(exc)}"
            ) from exc
        except TlsError as exc:
            raise error(
                f"the TLS handshake with Elasticsearch at {self.url} failed while {doing} "
                f"({exc}); set CITEBOT_ES_CA_CERTS to the PEM file of the cluster's CA"
            ) from exc
        except TransportError as exc:
            hint = "start it, or point CITEBOT_ES_URL at a running cluster"
            raise error(
                f"Elasticsearch at {self.url} is unreachable while {doing} ({exc}); {hint}"
            ) from exc

    # -- indices and stamp ----------------------------------------------------------------
    def _current_index(self, error: type[CitebotError] = StoreError) -> str | None:
        """The index the alias points at, or None when the alias does not exist."""
        with self._calls(f"resolving the alias {self.alias}", error):
            try:
                found = self.es.indices.get_alias(name=self.alias).body
            except NotFoundError:
                if self.es.indices.exists(index=self.alias):
                    raise StoreError(
                        f"{self.alias} on {self.url} is an index, not an alias: citebot keeps "
                        "its collection behind an alias; set CITEBOT_INDEX to another name"
                    ) from None
                return None
        return max(found) if found else None

    def _stamp_of(self, index: str) -> ModelStamp:
        with self._calls(f"reading the mapping of {index}"):
            mapping = self.es.indices.get_mapping(index=index).body
        meta = mapping[index]["mappings"].get("_meta", {}).get("citebot", {})
        if meta.get("format") != INDEX_FORMAT or "model" not in meta:
            raise StoreError(
                f"the index {index} behind {self.alias} was not written by this version of "
                f"citebot (format {meta.get('format')!r}, expected {INDEX_FORMAT}); re-ingest "
                "into a new CITEBOT_INDEX"
            )
        m = meta["model"]
        return ModelStamp(m["name"], int(m["dims"]), m["checksum"])

    def stamp(self) -> ModelStamp | None:
        """The stamp of the index behind the alias; before the first commit, the bound one."""
        index = self._current_index()
        return self._bound if index is None else self._stamp_of(index)

    def open_for(self, stamp: ModelStamp) -> None:
        index = self._current_index()
        current = None if index is None else self._stamp_of(index)
        if current is not None and current != stamp:
            raise ModelMismatchError(
                f"the Elasticsearch index {self.alias} at {self.url} was built with "
                f"{current.describe()}, but citebot is configured with {stamp.describe()}; "
                "re-ingest into a new CITEBOT_INDEX or configure the model it was built with"
            )
        self._bound = stamp

    def _writing_stamp(self) -> ModelStamp:
        stamp = self._bound or self.stamp()
        if stamp is None:
            raise StoreError("the store has no model stamp; call open_for(stamp) before writing")
        self._bound = stamp
        return stamp

    def _build_index(self) -> str:
        """The index this ingest run writes, created on the first write."""
        if self._build is None:
            stamp = self._writing_stamp()
            name = f"{self.alias}-v{_index_version()}"
            with self._calls(f"creating the index {name}"):
                self.es.indices.create(
                    index=name, settings=INDEX_SETTINGS, mappings=mapping_for(stamp, "building")
                )
            self._build = name
        return self._build

    # -- writes ---------------------------------------------------------------------------
    def document_hashes(self) -> dict[str, str]:
        return {
            hit["_source"]["source"]: hit["_source"]["content_hash"]
            for hit in self._scan({"term": {"kind": "document"}}, ["source", "content_hash"])
        }

    def replace_document(
        self, doc: DocumentRecord, chunks: Sequence[Chunk], windows: Sequence[Window]
    ) -> None:
        stamp = self._writing_stamp()
        stamp.check_widths(windows)
        known = {c.chunk_id for c in chunks}
        for w in windows:
            if w.chunk_id not in known:
                raise StoreError(f"window {w.index} belongs to chunk {w.chunk_id}, not in {doc.source}")
        index = self._build_index()
        self._drop_written(index, [doc.source])
        by_chunk: dict[str, list[Window]] = {}
        for w in windows:
            by_chunk.setdefault(w.chunk_id, []).append(w)
        actions = [_document_action(index, doc)] + [
            _chunk_action(index, c, by_chunk.get(c.chunk_id, [])) for c in chunks
        ]
        self._bulk(actions, f"writing {doc.source}")
        self._written[doc.source] = [a["_id"] for a in actions]
        self._deleted.discard(doc.source)

    def delete_documents(self, sources: Iterable[str]) -> None:
        sources = list(sources)
        if not sources:
            return
        index = self._build_index()
        self._drop_written(index, sources)
        self._deleted.update(sources)

    def _drop_written(self, index: str, sources: Sequence[str]) -> None:
        ids = [i for s in sources for i in self._written.pop(s, [])]
        if ids:
            self._bulk(
                [{"_op_type": "delete", "_index": index, "_id": i} for i in ids],
                "removing a replaced document from the new index",
            )

    def _bulk(self, actions: Iterable[dict[str, Any]], doing: str) -> int:
        done = 0
        with self._calls(doing):
            for ok, _ in streaming_bulk(
                self.es, actions, chunk_size=BULK_CHUNK_DOCS, max_chunk_bytes=BULK_MAX_BYTES,
                max_retries=BULK_MAX_RETRIES, initial_backoff=BULK_INITIAL_BACKOFF_S,
                max_backoff=BULK_MAX_BACKOFF_S, raise_on_error=True,
            ):
                done += ok
        return done

    def commit_ingest(self) -> None:
        """Copy the untouched documents over, then move the alias and drop old indices."""
        if self._build is None:
            return  # nothing was written or deleted: the current index stays
        build = self._build
        current = self._current_index()
        if current is not None:
            skip = set(self._written) | self._deleted
            self._bulk(self._copy_actions(current, build, skip), f"copying {current} to {build}")
        stamp = self._writing_stamp()
        with self._calls(f"completing the index {build}"):
            self.es.indices.refresh(index=build)
            self.es.indices.put_mapping(index=build, meta=mapping_for(stamp, "complete")["_meta"])
            self.es.indices.put_settings(index=build, settings={"refresh_interval": None})
            actions: list[dict[str, Any]] = [{"add": {"index": build, "alias": self.alias}}]
            if current is not None:
                actions.insert(0, {"remove": {"index": current, "alias": self.alias}})
            self.es.indices.update_aliases(actions=actions)
        self._build = None
        self._written.clear()
        self._deleted.clear()
        self._drop_old_indices(keep=build)

    def _copy_actions(self, source: str, target: str, skip: set[str]) -> Iterator[dict[str, Any]]:
        for hit in self._scan({"match_all": {}}, True, index=source, vectors=True):
            if hit["_source"]["source"] in skip:
                continue
            yield {"_op_type": "index", "_index": target, "_id": hit["_id"], "_source": hit["_source"]}

    def _drop_old_indices(self, keep: str) -> None:
        """Delete superseded indices; a build younger than STALE_BUILD_S may still be running."""
        with self._calls(f"listing the indices of {self.alias}"):
            found = self.es.indices.get(index=f"{self.alias}-v*", allow_no_indices=True,
                                        expand_wildcards="open,closed").body
        now_ms = time.time() * 1000
        for name, info in found.items():
            if name == keep or not self._versioned.fullmatch(name) or info.get("aliases"):
                continue
            state = info.get("mappings", {}).get("_meta", {}).get("citebot", {}).get("state")
            created_ms = float(info.get("settings", {}).get("index", {}).get("creation_date", now_ms))
            if state == "building" and now_ms - created_ms < STALE_BUILD_S * 1000:
                continue
            with self._calls(f"deleting the superseded index {name}"):
                try:
                    self.es.indices.delete(index=name)
                except NotFoundError:
                    pass

    def abandon_ingest(self) -> None:
        """Delete the index of an ingest run that will not be committed."""
        if self._build is not None:
            build, self._build = self._build, None
            self._written.clear()
            self._deleted.clear()
            with self._calls(f"deleting the unfinished index {build}"):
                self.es.indices.delete(index=build, ignore_unavailable=True)

    # -- reads ----------------------------------------------------------------------------
    def _search(self, doing: str, error: type[CitebotError] = SearchBackendError,
                **body: Any) -> dict[str, Any]:
        with self._calls(doing, error):
            try:
                return self.es.search(index=self.alias, **body).body
            except NotFoundError as exc:
                if _reason_type(exc) == "index_not_found_exception":
                    return {"hits": {"hits": [], "total": {"value": 0}}, "aggregations": {}}
                raise

    def _scan(
        self, query: dict[str, Any], source: list[str] | bool, *, index: str | None = None,
        vectors: bool = False, sort: list[Any] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every hit of a query, in pages, under one point in time."""
        target = index or self.alias
        with self._calls(f"reading {target}"):
            try:
                pit = self.es.open_point_in_time(index=target, keep_alive="2m").body["id"]
            except NotFoundError as exc:
                if _reason_type(exc) == "index_not_found_exception":
                    return
                raise
        after: list[Any] | None = None
        src: Any = source
        if vectors:
            src = {"exclude_vectors": False}
        try:
            while True:
                with self._calls(f"reading {target}"):
                    page = self.es.search(
                        pit={"id": pit, "keep_alive": "2m"}, query=query, size=PAGE_SIZE,
                        sort=sort or ["_shard_doc"], source=src, search_after=after,
                    ).body
                hits = page["hits"]["hits"]
                yield from hits
                if len(hits) < PAGE_SIZE:
                    return
                after = hits[-1]["sort"]
        finally:
            try:
                self.es.close_point_in_time(id=pit)
            except (ApiError, TransportError):
                pass  # it expires on its own

    def iter_chunks(self) -> list[Chunk]:
        hits = self._scan(
            {"term": {"kind": "chunk"}}, _CHUNK_FIELDS,
            sort=[{"source": "asc"}, {"ordinal": "asc"}, {"chunk_id": "asc"}],
        )
        return [_chunk(h["_source"]) for h in hits]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        if not chunk_ids:
            return []
        res = self._search(
            "fetching chunks", StoreError, query={"ids": {"values": list(chunk_ids)}},
            size=len(chunk_ids), source=_CHUNK_FIELDS,
        )
        by_id = {h["_id"]: _chunk(h["_source"]) for h in res["hits"]["hits"]
                 if h["_source"].get("chunk_id")}
        return [by_id[i] for i in chunk_ids if i in by_id]

    def neighbours(self, chunk: Chunk) -> tuple[Chunk | None, Chunk | None]:
        res = self._search(
            "fetching neighbouring chunks", StoreError,
            query={"bool": {"filter": [
                {"term": {"doc_id": chunk.doc_id}},
                {"terms": {"ordinal": [chunk.ordinal - 1, chunk.ordinal + 1]}},
                {"term": {"kind": "chunk"}},
            ]}},
            size=2, source=_CHUNK_FIELDS,
        )
        by_ord = {h["_source"]["ordinal"]: _chunk(h["_source"]) for h in res["hits"]["hits"]}
        return by_ord.get(chunk.ordinal - 1), by_ord.get(chunk.ordinal + 1)

    def chunk_count(self, *, scope: Scope | None = None) -> int:
        with self._calls("counting chunks"):
            try:
                return int(self.es.count(index=self.alias, query=_chunks(scope))["count"])
            except NotFoundError:
                return 0

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

    # -- collection statistics: in the current index's _meta, beside the model stamp -------
    def read_stat(self, key: str) -> dict | None:
        index = self._current_index()
        if index is None:
            return None
        with self._calls(f"reading the statistics of {index}"):
            mapping = self.es.indices.get_mapping(index=index).body
        meta = mapping[index]["mappings"].get("_meta", {}).get("citebot", {})
        return (meta.get("stats") or {}).get(key)

    def write_stat(self, key: str, value: dict) -> None:
        index = self._current_index()
        if index is None:
            raise StoreError(f"the alias {self.alias} holds no collection yet: ingest first")
        with self._calls(f"writing the statistics of {index}"):
            mapping = self.es.indices.get_mapping(index=index).body
            meta = mapping[index]["mappings"].get("_meta", {})
            citebot = dict(meta.get("citebot", {}))
            citebot["stats"] = {**(citebot.get("stats") or {}), key: value}
            # _meta is replaced whole on update, so the stamp and state are written back too
            self.es.indices.put_mapping(index=index, meta={**meta, "citebot": citebot})

    def close(self) -> None:
        """Abandon an uncommitted ingest (its index is deleted) and release connections."""
        try:
            self.abandon_ingest()
        finally:
            self.es.close()


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


def _document_action(index: str, doc: DocumentRecord) -> dict[str, Any]:
    return {
        "_op_type": "index", "_index": index, "_id": f"document:{doc.doc_id}",
        "_source": {
            "kind": "document", "doc_id": doc.doc_id, "source": doc.source,
            "content_hash": doc.content_hash, "title": doc.title, "format": doc.format,
        },
    }


def _chunk_action(index: str, c: Chunk, windows: Sequence[Window]) -> dict[str, Any]:
    text_words = words(c.text)
    heading_words = words(" ".join(c.heading_path))
    return {
        "_op_type": "index", "_index": index, "_id": c.chunk_id,
        "_source": {
            "kind": "chunk", "chunk_id": c.chunk_id, "doc_id": c.doc_id, "source": c.source,
            "ordinal": c.ordinal, "heading_path": list(c.heading_path), "page": c.page,
            "text": c.text, "tokens": c.tokens, "overlap_prev": c.overlap_prev,
            "overlap_next": c.overlap_next, "superseded": c.superseded,
            "url": c.url, "anchor": c.anchor,
            "words": " ".join(text_words), "heading": " ".join(heading_words),
            "vocab": sorted(set(text_words) | set(heading_words)),
            "n_tokens": len(text_words) + len(heading_words),
            "windows": [
                {"index": w.index, "start": w.start, "end": w.end,
                 "vector": np.asarray(w.vector, dtype=np.float32).tolist()}
                for w in sorted(windows, key=lambda w: w.index)
            ],
        },
    }


def _chunk(src: dict[str, Any]) -> Chunk:
    return Chunk(
        chunk_id=src["chunk_id"], doc_id=src["doc_id"], source=src["source"],
        heading_path=tuple(src.get("heading_path") or ()), page=src.get("page"),
        ordinal=int(src["ordinal"]), text=src["text"], tokens=int(src["tokens"]),
        overlap_prev=int(src.get("overlap_prev", 0)), overlap_next=int(src.get("overlap_next", 0)),
        superseded=bool(src.get("superseded", False)),
        url=src.get("url"), anchor=src.get("anchor"),
    )


def _reason_type(exc: ApiError) -> str:
    try:
        return str(exc.body["error"]["type"])  # type: ignore[index]
    except (TypeError, KeyError):
        return ""


def _reason(exc: ApiError) -> str:
    try:
        err = exc.body["error"]  # type: ignore[index]
        root = (err.get("root_cause") or [err])[0]
        return f"{root.get('type')}: {root.get('reason')}"
    except (TypeError, KeyError, AttributeError):
        return str(exc)


def _bulk_reason(item: dict[str, Any]) -> str:
    """`<id>: <error type>: <reason>` of one failed bulk item (never its document)."""
    for op in item.values():
        if isinstance(op, dict):
            err = op.get("error") or {}
            if isinstance(err, dict):
                return f"{op.get('_id')}: {err.get('type')}: {err.get('reason')}"
            return f"{op.get('_id')}: {err or op.get('status')}"
    return "no detail"
