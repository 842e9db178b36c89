"""The store protocol: what both backends (embedded SQLite, Elasticsearch) provide.

One contract test suite (tests/test_store_contract.py) runs against every implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

import numpy as np

from search.scope import Scope
from search.types import Chunk, ChunkVersion, DocumentRecord, LexicalQuery, ModelStamp, Window, WindowScore


class Store(Protocol):
    """A chunk store with a dense and a lexical arm.

    Every read that retrieval makes takes `scope` (search/scope.py): with a scope, the store
    answers as if it held only the chunks of the sources the scope allows. None = all.
    """

    def open_for(self, stamp: ModelStamp) -> None:
        """Bind the store to an embedding model: stamp an empty store, refuse another model's."""

    def stamp(self) -> ModelStamp | None:
        """The model stamp the store was built with, or None when it is empty."""

    def document_hashes(self) -> dict[str, str]:
        """Content hash of every stored document, by source."""

    def replace_document(self, doc: DocumentRecord, chunks: Sequence[Chunk], windows: Sequence[Window]) -> None:
        """Atomically replace one document's chunks and vectors."""

    def delete_documents(self, sources: Iterable[str]) -> None:
        """Remove documents (and their chunks and vectors) by source."""

    def ingest_lock(self) -> AbstractContextManager[None]:
        """Held for one ingest run: refuses a second run at once where runs would interleave
        (IngestLockedError); a no-op where each run builds its own index."""

    def commit_ingest(self) -> None:
        """Make an ingest run visible to readers (a no-op where each write is already visible)."""

    def iter_chunks(self) -> list[Chunk]:
        """Every chunk, in reading order (source, then ordinal)."""

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are left out."""

    def neighbours(self, chunk: Chunk) -> tuple[Chunk | None, Chunk | None]:
        """The previous and next chunk of the same document."""

    def chunk_versions(self, sources: Sequence[str]) -> list[ChunkVersion]:
        """Every chunk of these sources with its text hash and when its text last changed:
        an ingest keeps a chunk's `changed_at` while its document holds the same text, and
        sets it to the time of writing when the text is new or different."""

    def dense(
        self, vector: np.ndarray, k: int, *, scope: Scope | None = None, chunks: dict[str, Chunk] | None = None
    ) -> list[tuple[str, float]]:
        """Top-k chunk ids by cosine similarity; a chunk scores by its best window. With
        `chunks`, the store may put there the chunks of the ids it returns that it read along
        with them (all, some or none); the caller reads the rest with get_chunks."""

    def window_scores(self, vector: np.ndarray, chunk_ids: Sequence[str]) -> dict[str, list[WindowScore]]:
        """Every window of each of these chunks with its cosine to `vector`, in window
        order; unknown ids are left out. (Where in a passage the question's meaning lies:
        the extractive composer reads it, bot/answer/compose.py WINDOW_WEIGHT.)"""

    def lexical(
        self, query: LexicalQuery, k: int, *, scope: Scope | None = None, chunks: dict[str, Chunk] | None = None
    ) -> list[tuple[str, float]]:
        """Top-k chunk ids by BM25 over weighted term groups and phrases; `chunks` as in dense."""

    def phrase_matches(self, phrase: Sequence[str], limit: int, *, scope: Scope | None = None) -> list[str]:
        """Ids of chunks containing the tokens as an exact phrase (at most limit+1 returned)."""

    def phrase_matches_many(
        self, phrases: Sequence[Sequence[str]], limit: int, *, scope: Scope | None = None
    ) -> list[list[str]]:
        """phrase_matches for each phrase, in order (one round trip where the store has them)."""

    def spelling_candidates(self, terms: Sequence[str], *, scope: Scope | None = None) -> dict[str, list[str]]:
        """For each term, indexed words that may lie within two edits of it (a superset is
        allowed; the caller measures the distance). Never the whole vocabulary per call."""

    def doc_freqs(self, terms: Sequence[str], *, scope: Scope | None = None) -> dict[str, int]:
        """Number of chunks containing each (lower-cased) term."""

    def vocabulary(self, *, scope: Scope | None = None) -> set[str]:
        """Every indexed term of the passage text (for typo correction)."""

    def chunk_count(self, *, scope: Scope | None = None) -> int:
        """How many chunks the store holds."""

    def term_stats(
        self,
        terms: Sequence[str],
        *,
        scope: Scope | None = None,
        probes: Sequence[Sequence[str]] = (),
        limit: int = 0,
        held: dict[tuple[str, ...], list[str]] | None = None,
    ) -> tuple[dict[str, int], int]:
        """doc_freqs(terms) and chunk_count() together (one round trip where the store has
        them). With `held`, the store may also answer phrase_matches_many(probes, limit)
        there, by probe (as a tuple): all of them, or none."""

    def read_stat(self, key: str) -> dict | None:
        """A collection statistic stored with the index (search.calibration), or None."""

    def write_stat(self, key: str, value: dict) -> None:
        """Store a collection statistic with the index; it lasts until the next ingest
        that changes the collection."""

    def close(self) -> None:
        """Release connections."""
