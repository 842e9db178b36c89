"""The embedded store's lexical term groups scored in memory, exactly as FTS5 scores them.

FTS5 scores every row a group's words match before it keeps the best LEXICAL_GROUP_LIMIT
(search/embedded_lexical.py), so on a large collection a group of common words costs
milliseconds (5.0 ms p50 per group on the 10k-chunk rust-doc corpus). A process that keeps
reading an unchanged collection builds, once, each FTS5 table's postings (every word's
chunk rows and weighted counts) from the table's own content, cut by search.text.words
(unicode61's own cut, docs/decisions/0057-words-cut-by-sqlite.md), and scores a group of
single words with FTS5's bm25 in numpy: 0.56 ms p50, the same rows in the same order with
the same scores (docs/decisions/0058-lexical-postings-in-memory.md). Phrases, a stem that
is a phrase, and every read before the postings are built stay with FTS5.

When: a lexical read notes the collection's version (its content version, which a turn
or feedback leaves as it is: search/embedded.py, and this store's own writes); once a version has been seen for SETTLE_S, the next read starts one
build on a background thread, and reads use FTS5 until it is in. A one-question command
(`citebot ask`) never builds; `serve`, `chat` and `eval` do, once the collection is quiet.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from search.scope import Scope
from search.text import words

log = logging.getLogger("citebot.search")

# FTS5's bm25() constants (fts5_aux.c), which the scores must equal.
K1, B = 1.2, 0.75
# How long a version of the collection is seen before its postings are built: an ingest
# beside a server commits document by document, and a build after each (2.6 s of CPU per
# 10k chunks, docs/decisions/0058-lexical-postings-in-memory.md) would keep a core busy.
SETTLE_S = 10.0
TABLES = ("chunks_fts", "chunks_stems")


class TablePostings:
    """One FTS5 table's words: for each its rows and counts (text 1.0, heading `heading_weight`)."""

    def __init__(self, rows: Sequence[tuple[int, str | None, str | None]], heading_weight: float) -> None:
        lists: dict[str, tuple[list[int], list[float]]] = {}
        self.length = np.zeros(max((r[0] for r in rows), default=0) + 1, dtype=np.float64)
        for rowid, text, heading in rows:
            a, b = words(text or ""), words(heading or "")
            self.length[rowid] = len(a) + len(b)
            counts: dict[str, float] = dict(Counter(a))
            for w, n in Counter(b).items():
                counts[w] = counts.get(w, 0.0) + heading_weight * n
            for w, f in counts.items():
                pair = lists.setdefault(w, ([], []))
                pair[0].append(rowid)
                pair[1].append(f)
        self.words = {w: (np.array(r, dtype=np.int64), np.array(f, dtype=np.float64)) for w, (r, f) in lists.items()}
        self.rows = len(rows)
        mean = float(self.length.sum()) / max(1, self.rows)
        self._base = K1 * (1 - B + B * self.length / mean) if mean else np.full(len(self.length), K1)

    def top(self, terms: Sequence[str], limit: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """`"t1" OR "t2" …` ranked by FTS5's bm25 (negated: higher is better), the best
        `limit` rows the `allowed` mask (by row id) lets through, ties by row id."""
        score = np.zeros(len(self.length), dtype=np.float64)
        for t in terms:
            found = self.words.get(t)
            if found is None:
                continue
            rows, freq = found
            idf = math.log((self.rows - len(rows) + 0.5) / (len(rows) + 0.5))
            score[rows] += (idf if idf > 0.0 else 1e-6) * ((freq * (K1 + 1.0)) / (freq + self._base[rows]))
        hit = np.flatnonzero(score)
        if allowed is not None:
            hit = hit[allowed[hit]]
        order = hit[np.lexsort((hit, -score[hit]))][:limit]
        return [(int(i), float(score[i])) for i in order]


class Postings:
    """Both tables' postings at one version of the collection, and each chunk row's source."""

    def __init__(
        self,
        version: tuple[int, int],
        rows: Mapping[str, Sequence[tuple[int, str | None, str | None]]],
        sources: dict[int, str],
        heading_weight: float,
    ) -> None:
        self.version = version
        self.tables = {name: TablePostings(rows[name], heading_weight) for name in TABLES}
        self._rowids = np.fromiter(sources, dtype=np.int64, count=len(sources))
        self._sources = list(sources.values())
        self._size = max(len(t.length) for t in self.tables.values())
        self._masks: dict[tuple[str, ...], np.ndarray] = {}

    def allowed(self, scope: Scope | None) -> np.ndarray | None:
        """The rows the scope allows, as a mask by row id (cached per scope)."""
        if scope is None:
            return None
        mask = self._masks.get(scope.key)
        if mask is None:
            mask = np.zeros(self._size, dtype=bool)
            held = self._rowids < self._size
            mask[self._rowids[held]] = np.array(scope.allows_each(self._sources), dtype=bool)[held]
            self._masks[scope.key] = mask
        return mask


class PostingsKeeper:
    """When to build, and the postings of the version last built."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.generation = 0  # this store's own writes
        self.built: Postings | None = None
        self.building = False
        self._seen: tuple[tuple[int, int], float] | None = None
        self._lock = threading.Lock()

    def changed(self) -> None:
        """This store wrote: whatever was built or is being built is of another version."""
        with self._lock:
            self.generation += 1
            self.built = None
            self._seen = None

    def for_read(self, content_version: int, start: Callable[[tuple[int, int]], None]) -> Postings | None:
        """The postings of this version, or None (FTS5 answers); starts a build when the
        version has been seen for SETTLE_S."""
        version = (content_version, self.generation)
        with self._lock:
            if self.built is not None and self.built.version == version:
                return self.built
            now = self.clock()
            if self._seen is None or self._seen[0] != version:
                self._seen = (version, now)
            elif now - self._seen[1] >= SETTLE_S and not self.building:
                self.building = True
                try:
                    start(version)
                except RuntimeError as exc:  # no thread to be had: FTS5 goes on answering
                    self.building = False
                    self._seen = (version, now)
                    log.warning("the lexical postings' build did not start: %s", exc)
            return None

    def install(self, postings: Postings | None) -> None:
        """The build's outcome: its postings, or None when it failed (the next attempt waits
        SETTLE_S again, so a failing build is not retried at every read)."""
        with self._lock:
            self.building = False
            if postings is None:
                if self._seen is not None:
                    self._seen = (self._seen[0], self.clock())
            elif postings.version[1] == self.generation:
                self.built = postings
