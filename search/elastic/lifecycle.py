"""The index lifecycle of the Elasticsearch store: the model stamp, the writes of an ingest
run and its commit (build a new versioned index, merge it, move the alias, delete the old).

Every ingest run that changes anything writes a NEW index and moves the alias to it in
one atomic `_aliases` call in commit_ingest(), so a reader never sees a half-built
collection. Documents the run did not touch are copied from the current index into the
new one at commit (point in time + search_after + bulk: this distribution has no
reindex module), and superseded indices are deleted. A fresh index also means BM25
statistics never count deleted documents.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from re import Pattern
from typing import Any

from elasticsearch import NotFoundError
from elasticsearch.helpers import streaming_bulk

from search.elastic.client import ElasticClient
from search.elastic.mapping import (
    INDEX_FORMAT,
    INDEX_SETTINGS,
    READABLE_FORMATS,
    UPGRADABLE_FORMATS,
    _chunk,
    _chunk_action,
    _document_action,
    _token_fields,
    _version,
    mapping_for,
)
from search.elastic.writer import (
    BULK_CHUNK_DOCS,
    BULK_INITIAL_BACKOFF_S,
    BULK_MAX_BACKOFF_S,
    BULK_MAX_BYTES,
    BULK_MAX_RETRIES,
    _BulkWriter,
)
from search.errors import ModelMismatchError, StoreError
from search.types import Chunk, DocumentRecord, ModelStamp, Window, text_hash

# Standard logging: the command line routes it through its structlog handler; a program
# that uses the store without configuring logging sees warnings only, on stderr.
log = logging.getLogger("citebot.search")
# Indices of a READABLE_FORMATS format this process has warned about (once each).
_warned_formats: set[str] = set()

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


def _index_version() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")


class ElasticLifecycle(ElasticClient):
    """The model stamp, the writes of an ingest run and its commit (see the module docstring)."""

    # Set by ElasticStore.__init__; declared for the type checker.
    shards: int
    _versioned: Pattern[str]
    _bound: ModelStamp | None
    _build: str | None
    _written: dict[str, list[str]]
    _deleted: set[str]
    _writer: _BulkWriter | None
    _base: str | None  # the index behind the alias when this run's build was created

    def _stamp_of(self, index: str, *, upgrading: bool = False) -> ModelStamp:
        """The index's model stamp. An index of an older format that an ingest can upgrade
        is accepted when `upgrading` (an ingest opening it); a reader is refused, or for a
        READABLE_FORMATS one warned once per process."""
        meta = self._citebot_meta(index)
        if meta.get("format") in UPGRADABLE_FORMATS and "model" in meta:
            if not upgrading and meta["format"] in READABLE_FORMATS:
                if index not in _warned_formats:
                    _warned_formats.add(index)
                    log.warning(
                        "the index %s behind %s was written by an older citebot (format %s, expected %s): "
                        "words beyond ASCII and Latin script may not be found; run `citebot ingest` on its "
                        "collection again to upgrade it (every chunk is copied, nothing is embedded again)",
                        index,
                        self.alias,
                        meta["format"],
                        INDEX_FORMAT,
                    )
            elif not upgrading:
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
        return ModelStamp.from_dict(meta["model"])

    def stamp(self) -> ModelStamp | None:
        """The stamp of the index behind the alias; before the first commit, the bound one."""
        index = self._current_index()
        return self._bound if index is None else self._stamp_of(index)

    def open_for(self, stamp: ModelStamp) -> None:
        index = self._current_index()
        current = None if index is None else self._stamp_of(index, upgrading=True)
        if current is not None and not stamp.serves(current):
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
                    index=name,
                    settings={**INDEX_SETTINGS, "number_of_shards": self.shards},
                    mappings=mapping_for(stamp, "building"),
                )
            self._base = self._current_index()
            self._build = name
        return self._build

    # -- writes ---------------------------------------------------------------------------
    def document_hashes(self) -> dict[str, str]:
        return {
            hit["_source"]["source"]: hit["_source"]["content_hash"]
            for hit in self._scan({"term": {"kind": "document"}}, ["source", "content_hash"])
        }

    def replace_document(self, doc: DocumentRecord, chunks: Sequence[Chunk], windows: Sequence[Window]) -> None:
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
        kept = self._changed_at_of(doc.source)
        now = datetime.now(UTC).isoformat()
        actions = [_document_action(index, doc)] + [
            _chunk_action(index, c, by_chunk.get(c.chunk_id, []), kept.get(text_hash(c.text), now)) for c in chunks
        ]
        if self._writer is None:
            self._writer = _BulkWriter(self._bulk)
        self._writer.send(actions)
        self._written[doc.source] = [a["_id"] for a in actions]
        self._deleted.discard(doc.source)

    def _changed_at_of(self, source: str) -> dict[str, str | None]:
        """text hash -> changed_at of the document's chunks in the index this run replaces:
        a chunk whose text the document already held keeps the time it last changed."""
        if self._base is None:
            return {}
        query = {"bool": {"filter": [{"term": {"kind": "chunk"}}, {"term": {"source": source}}]}}
        fields = ["chunk_id", "source", "text_hash", "changed_at", "text"]
        return {
            v.text_hash: v.changed_at
            for v in map(_version, (h["_source"] for h in self._scan(query, fields, index=self._base)))
        }

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
                self.es.options(retry_on_timeout=True),
                actions,
                chunk_size=BULK_CHUNK_DOCS,
                max_chunk_bytes=BULK_MAX_BYTES,
                max_retries=BULK_MAX_RETRIES,
                initial_backoff=BULK_INITIAL_BACKOFF_S,
                max_backoff=BULK_MAX_BACKOFF_S,
                raise_on_error=True,
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
                merging = self.es.indices.stats(index=index, metric="merge").body["indices"][index]["primaries"][
                    "merges"
                ]["current"]
                idle = idle + 1 if merging == 0 else 0
                if idle >= MERGE_IDLE_POLLS or time.perf_counter() - started > MERGE_TIMEOUT_S:
                    log.warning(
                        "elasticsearch_merge_unfinished",
                        extra={
                            "index": index,
                            "segments": most,
                            "waited_s": round(time.perf_counter() - started, 1),
                            "detail": "the index is complete and searchable; queries pay per segment "
                            "until Elasticsearch merges it",
                        },
                    )
                    return
                time.sleep(pause)
                pause = min(MERGE_POLL_S, pause * 2)  # a small index is merged in milliseconds
        log.debug("elasticsearch_merged", extra={"index": index, "seconds": round(time.perf_counter() - started, 1)})

    def _segments_per_shard(self, index: str) -> list[int]:
        """Segments of each primary shard of the index (searchable or committed)."""
        shards = self.es.indices.segments(index=index).body["indices"][index]["shards"]
        return [len(next(c for c in copies if c["routing"]["primary"])["segments"]) for copies in shards.values()]

    def _copy_actions(self, source: str, target: str, skip: set[str]) -> Iterator[dict[str, Any]]:
        upgrade = self._citebot_meta(source).get("format") != INDEX_FORMAT
        for hit in self._scan({"match_all": {}}, True, index=source, vectors=True):
            src = hit["_source"]
            if src["source"] in skip:
                continue
            if upgrade and src.get("kind") == "chunk":
                src = {**src, **_token_fields(src["text"], _chunk(src).heading_text())}
            yield {"_op_type": "index", "_index": target, "_id": hit["_id"], "_source": src}

    def _drop_old_indices(self, keep: str) -> None:
        """Delete superseded indices; a build younger than STALE_BUILD_S may still be running."""
        with self._calls(f"listing the indices of {self.alias}"):
            found = self.es.indices.get(
                index=f"{self.alias}-v*", allow_no_indices=True, expand_wildcards="open,closed"
            ).body
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
