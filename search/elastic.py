"""The Elasticsearch store: the collection in a versioned index behind an alias.

    <alias>  ──▶  <alias>-v20250101120000123456   (complete; what readers search)
                  <alias>-v20250102090000654321   (being built by an ingest run)

Every ingest run that changes anything writes a NEW index and moves the alias to it in
one atomic `_aliases` call in commit_ingest(), so a reader never sees a half-built
collection. Documents the run did not touch are copied from the current index into the
new one at commit (point in time + search_after + bulk: this distribution has no
reindex module), and superseded indices are deleted. A fresh index also means BM25
statistics never count deleted documents.

Mapping (the measurements behind each choice are in docs/decisions/):

- Words. `words` and `heading` hold the passage's and the heading path's tokens as
  search/text.py cuts them, joined by spaces, indexed by the whitespace analyzer with
  positions (for phrases); `text` keeps the verbatim passage, not indexed. Cutting words
  once, in Python, for both backends makes document frequencies, phrases and the
  vocabulary agree by construction (0019-tokens-cut-in-python.md).
- Lexical ranking: Elasticsearch's own BM25 over those tokens, with FTS5's k1 and b
  (search/elastic_query.py says what each read costs); the stores agree on measured
  quality, not on every rank (0018-elasticsearch-bm25.md).
- `vocab`: the distinct tokens of text and heading as an indexed keyword array. A
  document frequency is the count of one vocab term (read from Lucene's term dictionary);
  spelling candidates come from a term suggester over it; `vocabulary()` is a composite
  aggregation over its doc values. No fielddata on text fields.
- Vectors: one document per chunk, its embedding windows as nested dense vectors;
  `knn` on the nested field scores a chunk by its best window (the protocol's rule) and
  returns k distinct chunks, and a chunk's words, counts and vectors stay on one document
  (0017-knn-tuning.md). Cosine, HNSW: see INDEX_OPTIONS.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any

import numpy as np
from elastic_transport import TlsError
from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    Elasticsearch,
    NotFoundError,
    TransportError,
)
from elasticsearch.helpers import BulkIndexError, streaming_bulk

from search.config import redact_url, scrub
from search.elastic_query import SIMILARITY, ElasticQueries, _chunks, scope_filter  # noqa: F401 (re-exported)
from search.errors import (
    CitebotError,
    ConfigError,
    ModelMismatchError,
    SearchBackendError,
    StoreError,
)
from search.scope import Scope
from search.text import stem, words
from search.types import Chunk, DocumentRecord, ModelStamp, Window

# Standard logging: the command line routes it through its structlog handler; a program
# that uses the store without configuring logging sees warnings only, on stderr.
log = logging.getLogger("citebot.search")

# Version of the index layout below; an index of another format is refused on open.
# 2: chunks carry `superseded` (their document says it no longer holds). Fields added
# since are optional and keep the format, so a citebot of either side reads the other's
# index (a server not yet upgraded keeps serving): `url` and `anchor` (search/links.py; a
# chunk without them has no link of its own). An older ingest cannot copy chunks that
# carry them into its strict mapping: after a downgrade, re-ingest into a new CITEBOT_INDEX.
# 3: `vocab` indexed (document frequencies and spelling candidates read Lucene's term
# dictionary), BM25 with FTS5's k1 and b as the default similarity, no stored token
# fields. A format-2 index is refused: re-ingest into a new CITEBOT_INDEX.
# 4: `stems` and `heading_stems` (search.text.stem of each token of `words` and
# `heading`), read by the stemmed term groups (search/retrieve.py STEM_WEIGHT). A format-3
# index is refused for reading; `citebot ingest` upgrades it: the next run builds a
# format-4 index even when no document changed, copying each chunk with its stems added
# (from the stored text; nothing is embedded again).
INDEX_FORMAT = 4
UPGRADABLE_FORMATS = frozenset({3})

# Primary shards of a new index (CITEBOT_ES_SHARDS): more only pay on more nodes
# (docs/decisions/0026-one-primary-shard.md). Replicas follow the cluster: 0 on one node.
DEFAULT_SHARDS = 1
INDEX_SETTINGS: dict[str, Any] = {
    "number_of_shards": DEFAULT_SHARDS,
    "auto_expand_replicas": "0-1",
    "refresh_interval": "-1",  # during the build; reset at commit
    "similarity": SIMILARITY,
}

# Float HNSW (m 16, ef_construction 100): quantised vectors plateau below exact recall
# and are not faster at this size (docs/decisions/0017-knn-tuning.md).
INDEX_OPTIONS: dict[str, Any] = {"type": "hnsw", "m": 16, "ef_construction": 100}

# Bulk requests: 200 chunk documents with their nested vectors are ~1.5 MB; 429s
# (the cluster is busy) are retried with exponential backoff.
BULK_CHUNK_DOCS = 200
# Chunk documents an ingest may hand the background writer ahead of what Elasticsearch
# has taken (the back-pressure; ~7.5 MB of actions at ~1.5 MB per 200).
BULK_QUEUE_DOCS = 1000
BULK_MAX_BYTES = 10 * 1024 * 1024
BULK_MAX_RETRIES = 5
BULK_INITIAL_BACKOFF_S = 1.0
BULK_MAX_BACKOFF_S = 30.0
# Transport-level retries of one request (connection errors, 502-504); a timed-out one is
# retried only in an ingest's bulk writes, so a turn ends within its timeout
# (docs/decisions/0022-no-timeout-retries.md).
REQUEST_MAX_RETRIES = 3
# Page size when reading a whole index (iter_chunks, copying documents at commit).
PAGE_SIZE = 500
# A build index left behind by a crashed ingest is deleted by a later commit once it
# is older than this; younger ones may belong to an ingest still running elsewhere.
STALE_BUILD_S = 6 * 3600
# A finished build is merged into one segment per shard before the alias moves (every
# query pays per segment; the merge halved p50 at 100k chunks). A merge slower than this
# goes on inside Elasticsearch after the alias has moved, and the ingest's log says so
# (docs/decisions/0016-merge-one-segment.md).
MERGE_TIMEOUT_S = 3 * 3600
MERGE_POLL_S = 0.5
# A merge that ended (no merge running for this many polls) with more than one segment
# per shard is reported, not waited for.
MERGE_IDLE_POLLS = 20
# The whitespace tokenizer cuts tokens longer than this; the vocabulary leaves them out.
MAX_TOKEN_CHARS = 255

_CHUNK_FIELDS = [
    "chunk_id", "doc_id", "source", "heading_path", "page", "ordinal", "text", "tokens",
    "overlap_prev", "overlap_next", "superseded", "url", "anchor",
]


def mapping_for(stamp: ModelStamp, state: str) -> dict[str, Any]:
    """The index mapping; the model stamp and the build state live in its _meta."""
    kw = {"type": "keyword"}
    stored = {"type": "keyword", "index": False, "doc_values": False}
    number = {"type": "integer", "index": False}
    words_field = {"type": "text", "analyzer": "whitespace", "index_options": "positions"}
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
            "words": words_field, "heading": words_field,
            "stems": words_field, "heading_stems": words_field,
            "vocab": {"type": "keyword", "ignore_above": MAX_TOKEN_CHARS},
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
        "retry_on_timeout": False,
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
    except ValueError as exc:  # a malformed URL; its text quotes the URL, password and all
        raise ConfigError(f"bad setting: CITEBOT_ES_URL: cannot use {redact_url(url)!r}: "
                          f"{scrub(str(exc), url)}") from None


def _index_version() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")


class ElasticStore(ElasticQueries):
    """The store protocol over one Elasticsearch alias (see the module docstring)."""

    def __init__(self, client: Elasticsearch, alias: str = "citebot",
                 shards: int = DEFAULT_SHARDS) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", alias):
            raise StoreError(
                f"CITEBOT_INDEX={alias!r} is not a usable Elasticsearch alias: use lower-case "
                "letters, digits, '-', '_' or '.', starting with a letter or digit"
            )
        if shards < 1:
            raise StoreError(f"CITEBOT_ES_SHARDS={shards} is not a shard count: use 1 or more")
        self.es = client
        self.alias = alias
        self.shards = shards
        nodes = client.transport.node_pool.all()
        self.url = ", ".join(str(n.base_url) for n in nodes) or "(no node)"
        self._versioned = re.compile(re.escape(alias) + r"-v\d{20}")
        self._bound: ModelStamp | None = None
        # The ingest run in progress: its index and what it wrote or deleted.
        self._build: str | None = None
        self._written: dict[str, list[str]] = {}  # source -> _ids written to the build
        self._deleted: set[str] = set()
        self._writer: _BulkWriter | None = None

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

    def _citebot_meta(self, index: str, doing: str = "reading the mapping") -> dict[str, Any]:
        """The citebot part of the index's _meta: format, state, model stamp, statistics."""
        with self._calls(f"{doing} of {index}"):
            mapping = self.es.indices.get_mapping(index=index).body
        return mapping[index]["mappings"].get("_meta", {}).get("citebot", {})

    def _stamp_of(self, index: str, *, upgrading: bool = False) -> ModelStamp:
        """The index's model stamp. An index of an older format that an ingest can upgrade
        is accepted only when `upgrading` (an ingest opening it); a reader is refused."""
        meta = self._citebot_meta(index)
        if meta.get("format") in UPGRADABLE_FORMATS and "model" in meta:
            if not upgrading:
                raise StoreError(
                    f"the index {index} behind {self.alias} was written by an older citebot "
                    f"(format {meta['format']}, expected {INDEX_FORMAT}: it lacks the stemmed "
                    "fields); run `citebot ingest` on its collection again to upgrade it "
                    "(every chunk is copied, nothing is embedded again)"
                )
        elif meta.get("format") != INDEX_FORMAT or "model" not in meta:
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
        current = None if index is None else self._stamp_of(index, upgrading=True)
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
                    index=name, settings={**INDEX_SETTINGS, "number_of_shards": self.shards},
                    mappings=mapping_for(stamp, "building"),
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
        if self._writer is None:
            self._writer = _BulkWriter(self)
        self._writer.send(actions)
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
            self._flush_writes()  # the deletes go after the writes they undo
            self._bulk(
                [{"_op_type": "delete", "_index": index, "_id": i} for i in ids],
                "removing a replaced document from the new index",
            )

    def _flush_writes(self) -> None:
        """Wait until every document handed to the background writer is written (or raise
        the error that stopped it)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.finish()

    def _bulk(self, actions: Iterable[dict[str, Any]], doing: str) -> int:
        done = 0
        with self._calls(doing):
            for ok, _ in streaming_bulk(
                # An ingest's bulk writes may wait out a slow node and ask again (a turn may not).
                self.es.options(retry_on_timeout=True), actions, chunk_size=BULK_CHUNK_DOCS, max_chunk_bytes=BULK_MAX_BYTES,
                max_retries=BULK_MAX_RETRIES, initial_backoff=BULK_INITIAL_BACKOFF_S,
                max_backoff=BULK_MAX_BACKOFF_S, raise_on_error=True,
            ):
                done += ok
        return done

    def ingest_lock(self) -> AbstractContextManager[None]:
        """None needed: each run writes an index of its own and moves the alias at commit."""
        return nullcontext()

    def commit_ingest(self) -> None:
        """Copy the untouched documents over, then move the alias and drop old indices."""
        if self._build is None:
            current = self._current_index()
            if current is None or self._citebot_meta(current).get("format") == INDEX_FORMAT:
                return  # nothing was written or deleted: the current index stays
            self._build_index()  # an older format: this run rewrites it (UPGRADABLE_FORMATS)
        build = self._build
        assert build is not None
        self._flush_writes()
        current = self._current_index()
        if current is not None:
            skip = set(self._written) | self._deleted
            self._bulk(self._copy_actions(current, build, skip), f"copying {current} to {build}")
        stamp = self._writing_stamp()
        with self._calls(f"completing the index {build}"):
            self.es.indices.refresh(index=build)
            self.es.indices.put_mapping(index=build, meta=mapping_for(stamp, "complete")["_meta"])
            self.es.indices.put_settings(index=build, settings={"refresh_interval": None})
        self._merge(build)
        with self._calls(f"moving the alias {self.alias} to {build}"):
            actions: list[dict[str, Any]] = [{"add": {"index": build, "alias": self.alias}}]
            if current is not None:
                actions.insert(0, {"remove": {"index": current, "alias": self.alias}})
            self.es.indices.update_aliases(actions=actions)
        self._build = None
        self._written.clear()
        self._deleted.clear()
        self._drop_old_indices(keep=build)

    def _merge(self, index: str) -> None:
        """Merge a finished build into one segment per shard (see MERGE_TIMEOUT_S). The merge
        is started without waiting and followed through the index's own segment and merge
        statistics, each read with the ordinary request timeout: a node that stops
        answering fails the ingest as any other request would, and the key needs no more
        than the `manage` index privilege (the task API would need cluster `monitor`)."""
        started, pause, idle = time.perf_counter(), MERGE_POLL_S / 16, 0
        with self._calls(f"merging the segments of {index}"):
            self.es.indices.forcemerge(index=index, max_num_segments=1, wait_for_completion=False)
            while True:
                most = max(self._segments_per_shard(index))
                if most <= 1:
                    break
                merging = self.es.indices.stats(index=index, metric="merge").body[
                    "indices"][index]["primaries"]["merges"]["current"]
                idle = idle + 1 if merging == 0 else 0
                if idle >= MERGE_IDLE_POLLS or time.perf_counter() - started > MERGE_TIMEOUT_S:
                    log.warning("elasticsearch_merge_unfinished", extra={
                        "index": index, "segments": most, "waited_s": round(time.perf_counter() - started, 1),
                        "detail": "the index is complete and searchable; queries pay per segment "
                                  "until Elasticsearch merges it"})
                    return
                time.sleep(pause)
                pause = min(MERGE_POLL_S, pause * 2)  # a small index is merged in milliseconds
        log.debug("elasticsearch_merged", extra={"index": index, "seconds": round(time.perf_counter() - started, 1)})

    def _segments_per_shard(self, index: str) -> list[int]:
        """Segments of each primary shard of the index (searchable or committed)."""
        shards = self.es.indices.segments(index=index).body["indices"][index]["shards"]
        return [len(next(c for c in copies if c["routing"]["primary"])["segments"])
                for copies in shards.values()]

    def _copy_actions(self, source: str, target: str, skip: set[str]) -> Iterator[dict[str, Any]]:
        upgrade = self._citebot_meta(source).get("format") != INDEX_FORMAT
        for hit in self._scan({"match_all": {}}, True, index=source, vectors=True):
            src = hit["_source"]
            if src["source"] in skip:
                continue
            if upgrade and src.get("kind") == "chunk":
                src = {**src, **_stems_of(words(src["text"]), words(" ".join(src.get("heading_path") or ())))}
            yield {"_op_type": "index", "_index": target, "_id": hit["_id"], "_source": src}

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
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.abandon()
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

    # -- collection statistics: in the current index's _meta, beside the model stamp -------
    def read_stat(self, key: str) -> dict | None:
        index = self._current_index()
        if index is None:
            return None
        meta = self._citebot_meta(index, "reading the statistics")
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


class _BulkWriter:
    """Writes an ingest's documents in a background thread while the caller embeds the
    next ones: one streaming_bulk over a bounded queue. One thread keeps the order of the
    actions (parallel_bulk sends requests out of order, and a document replaced twice in a
    run must be deleted before it is written again; _drop_written flushes first). The
    queue is the back-pressure: when Elasticsearch is slower than the model, send() waits
    once BULK_QUEUE_DOCS actions are pending. An error stops the writer and is raised by
    the next send() or by finish() (commit), with the message of ElasticStore._calls."""

    _END = object()

    def __init__(self, store: ElasticStore) -> None:
        self._store = store
        self._queue: queue.Queue = queue.Queue(maxsize=BULK_QUEUE_DOCS)
        self._error: BaseException | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="citebot-es-bulk", daemon=True)
        self._thread.start()

    def _actions(self) -> Iterator[dict[str, Any]]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            yield item

    def _run(self) -> None:
        try:
            self._store._bulk(self._actions(), "writing documents to the new index")
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            self._error = exc
        finally:
            self._stopped.set()

    def _put(self, item: object) -> None:
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def send(self, actions: Sequence[dict[str, Any]]) -> None:
        self._raise()
        for action in actions:
            self._put(action)

    def finish(self) -> None:
        self._put(self._END)
        self._thread.join()
        self._raise()

    def abandon(self) -> None:
        """Stop without waiting for the writes (the index is about to be deleted)."""
        self._stopped.set()
        while True:  # unblock the thread: drop what is queued, then end its stream
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        try:
            self._queue.put_nowait(self._END)
        except queue.Full:
            pass
        self._thread.join(timeout=30)


def _document_action(index: str, doc: DocumentRecord) -> dict[str, Any]:
    return {
        "_op_type": "index", "_index": index, "_id": f"document:{doc.doc_id}",
        "_source": {
            "kind": "document", "doc_id": doc.doc_id, "source": doc.source,
            "content_hash": doc.content_hash, "title": doc.title, "format": doc.format,
        },
    }


def _stems_of(text_words: Sequence[str], heading_words: Sequence[str]) -> dict[str, str]:
    """A chunk's stemmed fields, from its words (the same tokens the embedded store stems)."""
    return {"stems": " ".join(map(stem, text_words)),
            "heading_stems": " ".join(map(stem, heading_words))}


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
            **_stems_of(text_words, heading_words),
            "vocab": sorted(set(text_words) | set(heading_words)),
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
        return str(exc.body["error"]["type"])
    except (TypeError, KeyError):
        return ""


def _reason(exc: ApiError) -> str:
    try:
        err = exc.body["error"]
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
