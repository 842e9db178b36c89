"""The embedded store's dense reads: every window's vector in one numpy matrix, read once
per version of the collection, scanned exactly for a question's vector. A mixin of
EmbeddedStore (search/embedded.py), which owns the connection, lock and caches.

From the second read of a version on, a process that keeps reading it (serve, chat, eval)
builds that matrix's int8 scan on a background thread (search/embedded_scan.py: the same
result, about a third of the time); reads before it is in, and one-question commands, scan
the floats.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from search import embedded_scan
from search.errors import DimensionError
from search.scope import Scope, limiting
from search.types import Chunk, WindowScore

if TYPE_CHECKING:
    from search.types import ModelStamp

log = logging.getLogger("citebot.search")

_Matrix = tuple[int, np.ndarray, np.ndarray, list[str], list[str]]


class DenseReads:
    """The vector matrix, its scope masks, the exact scan and window scores."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _matrix: _Matrix | None
    _masks: dict[tuple[int, tuple[str, ...]], np.ndarray]
    # The int8 scan of one matrix (that tuple itself, not its version: a write of this store
    # reloads the matrix, under the same version when the counter row is gone), and how often
    # that matrix was read before it was asked for.
    _scan: tuple[_Matrix, embedded_scan.Int8Scan | None] | None
    _scan_reads: tuple[_Matrix | None, int]

    if TYPE_CHECKING:  # EmbeddedStore's

        def stamp(self) -> ModelStamp | None: ...

        def _collection_version(self) -> int: ...

    def _vectors(self) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
        with self._lock:
            # Moved by any write to the collection, this process's or another's (an ingest
            # beside a server), not by a turn or feedback (search/embedded.py).
            version = self._collection_version()
            if self._matrix is None or self._matrix[0] != version:
                stamp = self.stamp()
                dims = stamp.dims if stamp else 0
                rows = self._db.execute(
                    "SELECT w.chunk_rowid, w.vector, c.chunk_id, c.source FROM windows w"
                    " JOIN chunks c ON c.id = w.chunk_rowid ORDER BY w.chunk_rowid, w.idx"
                ).fetchall()
                ids: list[str] = []
                sources: list[str] = []
                owner = np.empty(len(rows), dtype=np.int64)
                last = None
                for i, (rowid, _, chunk_id, source) in enumerate(rows):
                    if rowid != last:
                        ids.append(chunk_id)
                        sources.append(source)
                        last = rowid
                    owner[i] = len(ids) - 1
                matrix = (
                    np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, dims)
                    if rows
                    else np.zeros((0, dims), dtype=np.float32)
                )
                self._matrix = (version, matrix, owner, ids, sources)
                self._masks = {}
            _, matrix, owner, ids, sources = self._matrix
            return matrix, owner, ids, sources

    def _scope_mask(self, scope: Scope, sources: list[str]) -> np.ndarray:
        """Which chunks of the vector matrix the scope allows (cached per matrix version)."""
        assert self._matrix is not None
        key = (self._matrix[0], scope.key)
        mask = self._masks.get(key)
        if mask is None:
            mask = np.array(scope.allows_each(sources), dtype=bool)
            self._masks[key] = mask
        return mask

    def dense(
        self, vector: np.ndarray, k: int, *, scope: Scope | None = None, chunks: dict[str, Chunk] | None = None
    ) -> list[tuple[str, float]]:
        # `chunks` is left as it is: the caller reads them, a local read.
        scope = limiting(scope)
        with self._lock:
            matrix, owner, ids, sources = self._vectors()
            mask = self._scope_mask(scope, sources) if scope is not None and ids else None
            scan = self._int8_scan()
        if not ids:
            return []
        if vector.shape != (matrix.shape[1],):
            raise DimensionError(f"query vector has width {vector.shape}, the store holds {matrix.shape[1]}")
        found = scan.top(vector, k, mask) if scan is not None else None
        top, scores = found if found is not None else embedded_scan.float_top(matrix, owner, len(ids), vector, k, mask)
        return [(ids[i], float(score)) for i, score in zip(top, scores, strict=True)]

    def _int8_scan(self) -> embedded_scan.Int8Scan | None:
        """The current matrix's int8 scan when it is built; from its second read on, starts
        the build on a thread. Called under the store's lock, after _vectors."""
        current = self._matrix
        if current is None:
            return None
        if self._scan is not None:
            if self._scan[0] is current:
                return self._scan[1]
            self._scan = None  # an earlier matrix's: its memory is let go now, not at the next build
        reads = self._scan_reads[1] + 1 if self._scan_reads[0] is current else 1
        self._scan_reads = (current, reads)
        if reads == 2:
            try:
                threading.Thread(
                    target=self._build_scan, args=(current,), name="citebot-int8-scan", daemon=True
                ).start()
            except RuntimeError as exc:  # no thread to be had: the float scan goes on answering
                log.warning("the int8 dense scan's build did not start: %s", exc)
        return None

    def _build_scan(self, current: _Matrix) -> None:
        _, matrix, owner, ids, _ = current
        scan = embedded_scan.build(matrix, owner, len(ids))  # a failure is logged there and gives None
        with self._lock:
            if current is self._matrix:  # a build that ends after a write would hide the new matrix's
                self._scan = (current, scan)

    def build_scan(self) -> None:
        """Build the int8 scan of the collection as it is now, at once (a benchmark measures a
        server's steady state with it, as with build_postings)."""
        with self._lock:
            self._vectors()
            current = self._matrix
        if current is not None:
            self._build_scan(current)

    def window_scores(self, vector: np.ndarray, chunk_ids: Sequence[str]) -> dict[str, list[WindowScore]]:
        if not chunk_ids:
            return {}
        marks = ",".join("?" * len(chunk_ids))
        with self._lock:
            rows = self._db.execute(
                "SELECT c.chunk_id, w.start, w.end, w.vector FROM windows w"
                f" JOIN chunks c ON c.id = w.chunk_rowid WHERE c.chunk_id IN ({marks})"
                " ORDER BY w.chunk_rowid, w.idx",
                list(chunk_ids),
            ).fetchall()
        if not rows:
            return {}
        matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        if vector.shape != (matrix.shape[1],):
            raise DimensionError(f"query vector has width {vector.shape}, the store holds {matrix.shape[1]}")
        scores = matrix @ vector.astype(np.float32)
        out: dict[str, list[WindowScore]] = {}
        for (cid, start, end, _), score in zip(rows, scores, strict=True):
            out.setdefault(cid, []).append(WindowScore(int(start), int(end), float(score)))
        return out
