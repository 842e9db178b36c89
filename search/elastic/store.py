"""The Elasticsearch store: the collection in a versioned index behind an alias (the
package docstring draws it). ElasticStore puts the parts together: the client and its
errors (client.py), the stamp, writes and index lifecycle (lifecycle.py), the retrieval
reads (query.py), and here the reads of whole chunks and the collection statistics.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from elasticsearch import Elasticsearch, NotFoundError

from search.elastic.lifecycle import ElasticLifecycle
from search.elastic.mapping import _CHUNK_FIELDS, DEFAULT_SHARDS, _chunk, _version
from search.elastic.query import ElasticQueries, _chunks, _keep_chunks
from search.elastic.writer import _BulkWriter
from search.errors import StoreError
from search.scope import Scope
from search.types import Chunk, ChunkVersion, ModelStamp


class ElasticStore(ElasticLifecycle, ElasticQueries):
    """The store protocol over one Elasticsearch alias (see the package docstring)."""

    def __init__(self, client: Elasticsearch, alias: str = "citebot", shards: int = DEFAULT_SHARDS) -> None:
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
        self._base: str | None = None

    # -- reads of whole chunks ------------------------------------------------------------
    def iter_chunks(self) -> list[Chunk]:
        hits = self._scan(
            {"term": {"kind": "chunk"}},
            _CHUNK_FIELDS,
            sort=[{"source": "asc"}, {"ordinal": "asc"}, {"chunk_id": "asc"}],
        )
        return [_chunk(h["_source"]) for h in hits]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        if not chunk_ids:
            return []
        res = self._search(
            "fetching chunks",
            StoreError,
            query={"ids": {"values": list(chunk_ids)}},
            size=len(chunk_ids),
            source=_CHUNK_FIELDS,
        )
        by_id: dict[str, Chunk] = {}
        _keep_chunks(res, by_id)
        return [by_id[i] for i in chunk_ids if i in by_id]

    def neighbours(self, chunk: Chunk) -> tuple[Chunk | None, Chunk | None]:
        res = self._search(
            "fetching neighbouring chunks",
            StoreError,
            query={
                "bool": {
                    "filter": [
                        {"term": {"doc_id": chunk.doc_id}},
                        {"terms": {"ordinal": [chunk.ordinal - 1, chunk.ordinal + 1]}},
                        {"term": {"kind": "chunk"}},
                    ]
                }
            },
            size=2,
            source=_CHUNK_FIELDS,
        )
        by_ord = {h["_source"]["ordinal"]: _chunk(h["_source"]) for h in res["hits"]["hits"]}
        return by_ord.get(chunk.ordinal - 1), by_ord.get(chunk.ordinal + 1)

    def chunk_versions(self, sources: Sequence[str]) -> list[ChunkVersion]:
        wanted = sorted(set(sources))
        if not wanted:
            return []
        query = {"bool": {"filter": [{"term": {"kind": "chunk"}}, {"terms": {"source": wanted}}]}}
        hits = list(self._scan(query, ["chunk_id", "source", "text_hash", "changed_at"]))
        # A chunk an older citebot wrote has no hash: its text is read to compute it.
        bare = [h["_source"]["chunk_id"] for h in hits if not h["_source"].get("text_hash")]
        texts = {c.chunk_id: c.text for n in range(0, len(bare), 1000) for c in self.get_chunks(bare[n : n + 1000])}
        return [_version({**h["_source"], "text": texts.get(h["_source"]["chunk_id"], "")}) for h in hits]

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
