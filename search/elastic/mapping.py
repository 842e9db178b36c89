"""The Elasticsearch index's mapping, its format history and the documents written to it.

Mapping (the measurements behind each choice are in docs/decisions/):

- Words. `words` and `heading` hold the passage's and the heading path's tokens as
  search/text.py cuts them, joined by spaces, indexed by the whitespace analyzer with
  positions (for phrases); `text` keeps the verbatim passage, not indexed. Cutting words
  once, in Python, for both backends makes document frequencies, phrases and the
  vocabulary agree by construction (0019-tokens-cut-in-python.md).
- Lexical ranking: Elasticsearch's own BM25 over those tokens, with FTS5's k1 and b
  (search/elastic/query.py says what each read costs); the stores agree on measured
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

from collections.abc import Sequence
from typing import Any

import numpy as np

from search.text import stem, words
from search.types import (
    Chunk,
    ChunkVersion,
    DocumentRecord,
    ModelStamp,
    Window,
    sections_as_data,
    sections_from_data,
    text_hash,
)

# Version of the index layout below; an index of another format is refused on open.
# 2: chunks carry `superseded` (their document says it no longer holds). Fields added
# since are optional and keep the format, so a citebot of either side reads the other's
# index (a server not yet upgraded keeps serving): `url` and `anchor` (search/links.py; a
# chunk without them has no link of its own); `text_hash` and `changed_at` (when an
# ingest last wrote a different text for the chunk; a chunk without them is hashed from
# its text when read, and its change time is unknown). An older ingest cannot copy chunks that
# carry them into its strict mapping: after a downgrade, re-ingest into a new CITEBOT_INDEX.
# So is `sections` (a chunk that joins short sections: each one's start, heading path and
# anchor; docs/decisions/0029-short-chunks.md), absent from a chunk of one section.
# 3: `vocab` indexed (document frequencies and spelling candidates read Lucene's term
# dictionary), BM25 with FTS5's k1 and b as the default similarity, no stored token
# fields. A format-2 index is refused: re-ingest into a new CITEBOT_INDEX.
# 4: `stems` and `heading_stems` (search.text.stem of each token of `words` and
# `heading`), read by the stemmed term groups (search/retrieve.py STEM_WEIGHT). A format-3
# index is refused for reading; `citebot ingest` upgrades it: the next run builds a
# format-4 index even when no document changed, copying each chunk with its stems added
# (from the stored text; nothing is embedded again).
# 5: tokens beyond ASCII cut as SQLite's unicode61 cuts them (search/text.py: "новый" no
# longer "новыи", "άλφα" no longer "αλφα"). A format-4 index is still read, with a warning:
# its ASCII and Latin tokens are the same, its other words are not found as the question
# cuts them. `citebot ingest` upgrades a format-3 or -4 index, cutting every chunk's token
# fields again from its stored text.
# 6: combining marks inside words (search.text.TOKENIZE: "हिन्दी" one token, not "ह" and
# "द"). A format-4 or -5 index is still read, with the same warning; `citebot ingest`
# upgrades it as above.
INDEX_FORMAT = 6
UPGRADABLE_FORMATS = frozenset({3, 4, 5})
READABLE_FORMATS = frozenset({4, 5})  # of the upgradable ones: read until an ingest upgrades them

# Lucene's BM25 with SQLite FTS5's constants (search/embedded.py ranks by FTS5's bm25()),
# as the index's default similarity.
SIMILARITY: dict[str, Any] = {"default": {"type": "BM25", "k1": 1.2, "b": 0.75}}

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

# The whitespace tokenizer cuts tokens longer than this; the vocabulary leaves them out.
MAX_TOKEN_CHARS = 255

_CHUNK_FIELDS = [
    "chunk_id",
    "doc_id",
    "source",
    "heading_path",
    "page",
    "ordinal",
    "text",
    "tokens",
    "overlap_prev",
    "overlap_next",
    "superseded",
    "url",
    "anchor",
    "sections",
]


def mapping_for(stamp: ModelStamp, state: str) -> dict[str, Any]:
    """The index mapping; the model stamp and the build state live in its _meta."""
    kw = {"type": "keyword"}
    stored = {"type": "keyword", "index": False, "doc_values": False}
    number = {"type": "integer", "index": False}
    words_field = {"type": "text", "analyzer": "whitespace", "index_options": "positions"}
    return {
        "dynamic": "strict",
        "_meta": {"citebot": {"format": INDEX_FORMAT, "state": state, "model": stamp.as_dict()}},
        "properties": {
            "kind": kw,  # "chunk" or "document"
            "doc_id": kw,
            "source": kw,
            "chunk_id": kw,
            "ordinal": {"type": "integer"},
            "heading_path": stored,
            "page": stored,
            "text": {"type": "text", "index": False},
            "tokens": number,
            "overlap_prev": number,
            "overlap_next": number,
            "superseded": {"type": "boolean", "index": False},
            "url": stored,
            "anchor": stored,
            "text_hash": stored,
            "changed_at": stored,
            "sections": {"type": "object", "enabled": False},
            "words": words_field,
            "heading": words_field,
            "stems": words_field,
            "heading_stems": words_field,
            "vocab": {"type": "keyword", "ignore_above": MAX_TOKEN_CHARS},
            "windows": {
                "type": "nested",
                "properties": {
                    "index": number,
                    "start": number,
                    "end": number,
                    "vector": {
                        "type": "dense_vector",
                        "dims": stamp.dims,
                        "similarity": "cosine",
                        "index_options": INDEX_OPTIONS,
                    },
                },
            },
            "content_hash": stored,
            "title": stored,
            "format": stored,
        },
    }


def _document_action(index: str, doc: DocumentRecord) -> dict[str, Any]:
    return {
        "_op_type": "index",
        "_index": index,
        "_id": f"document:{doc.doc_id}",
        "_source": {
            "kind": "document",
            "doc_id": doc.doc_id,
            "source": doc.source,
            "content_hash": doc.content_hash,
            "title": doc.title,
            "format": doc.format,
        },
    }


def _token_fields(text: str, heading: str) -> dict[str, Any]:
    """A chunk's lexical fields: the tokens of its text and of its headings
    (search.text.words), their stems (the same the embedded store stems) and its vocabulary."""
    text_words, heading_words = words(text), words(heading)
    return {
        "words": " ".join(text_words),
        "heading": " ".join(heading_words),
        "stems": " ".join(map(stem, text_words)),
        "heading_stems": " ".join(map(stem, heading_words)),
        "vocab": sorted(set(text_words) | set(heading_words)),
    }


def _chunk_action(index: str, c: Chunk, windows: Sequence[Window], changed_at: str | None = None) -> dict[str, Any]:
    return {
        "_op_type": "index",
        "_index": index,
        "_id": c.chunk_id,
        "_source": {
            "kind": "chunk",
            "chunk_id": c.chunk_id,
            "doc_id": c.doc_id,
            "source": c.source,
            "ordinal": c.ordinal,
            "heading_path": list(c.heading_path),
            "page": c.page,
            "text": c.text,
            "tokens": c.tokens,
            "overlap_prev": c.overlap_prev,
            "overlap_next": c.overlap_next,
            "superseded": c.superseded,
            "url": c.url,
            "anchor": c.anchor,
            "text_hash": text_hash(c.text),
            "changed_at": changed_at,
            **({"sections": data} if (data := sections_as_data(c.sections)) else {}),
            **_token_fields(c.text, c.heading_text()),
            "windows": [
                {
                    "index": w.index,
                    "start": w.start,
                    "end": w.end,
                    "vector": np.asarray(w.vector, dtype=np.float32).tolist(),
                }
                for w in sorted(windows, key=lambda w: w.index)
            ],
        },
    }


def _chunk(src: dict[str, Any]) -> Chunk:
    return Chunk(
        chunk_id=src["chunk_id"],
        doc_id=src["doc_id"],
        source=src["source"],
        heading_path=tuple(src.get("heading_path") or ()),
        page=src.get("page"),
        ordinal=int(src["ordinal"]),
        text=src["text"],
        tokens=int(src["tokens"]),
        overlap_prev=int(src.get("overlap_prev", 0)),
        overlap_next=int(src.get("overlap_next", 0)),
        superseded=bool(src.get("superseded", False)),
        url=src.get("url"),
        anchor=src.get("anchor"),
        sections=sections_from_data(src.get("sections")),
    )


def _version(src: dict[str, Any]) -> ChunkVersion:
    """A chunk's version from its _source (`text` read only when it has no `text_hash`)."""
    return ChunkVersion(
        src["chunk_id"], src["source"], src.get("text_hash") or text_hash(src.get("text") or ""), src.get("changed_at")
    )
