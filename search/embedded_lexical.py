"""The embedded store's lexical reads: FTS5 BM25 over term groups and phrases, phrase
matches, document frequencies, the vocabulary and spelling candidates, whole or under a
scope. A mixin of EmbeddedStore (search/embedded.py), which owns the connection and lock.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from search import embedded_postings
from search.embedded_postings import Postings, PostingsKeeper
from search.scope import Scope, limiting
from search.text import query_stems, words
from search.types import LexicalQuery

if TYPE_CHECKING:
    from search.types import Chunk

log = logging.getLogger("citebot.search")

# How many FTS5 matches one lexical group may contribute before the groups are summed and
# cut to the arm's pool (30). 100 ranked the dev items as 500 did and kept the rust-doc
# questions' hybrid top 10, and the lexical stage there took 0.7 of its time at 500
# (docs/decisions/0048-lexical-stage-cost.md).
LEXICAL_GROUP_LIMIT = 100

# BM25 weight of the heading path against the passage text (1.0). Headings name what a
# section is about ("Per diem", "Escalation"), but they repeat over every chunk of a
# long section, so they count for half.
HEADING_WEIGHT = 0.5

# Spelling candidates lie within this many edits (search/typos.py).
SPELLING_MAX_EDITS = 2
# Vocabularies kept in memory for spelling (one per scope); a new version clears them.
VOCAB_CACHE_SCOPES = 16

# The scope predicate in SQL: citebot_in_scope(source, regex) is 1 when the scope's regex
# (search.scope.Scope.regex) matches the whole source path.
_IN_SCOPE = "SELECT id FROM chunks WHERE citebot_in_scope(source, ?)"


class LexicalReads:
    """FTS5 reads over chunks_fts, chunks_stems and their vocabularies."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _vocab_cache: dict[tuple[int, tuple[str, ...]], dict[tuple[int, int, str], list[str]]]
    _keeper: PostingsKeeper  # the term groups' postings in memory (search/embedded_postings.py)

    if TYPE_CHECKING:  # EmbeddedStore's
        _CHUNK_COLS: str

        def chunk_count(self, *, scope: Scope | None = None) -> int: ...

        def _collection_version(self) -> int: ...

        @staticmethod
        def _chunk(row: tuple) -> Chunk: ...

    def _match(
        self, expression: str, limit: int, scope: Scope | None = None, table: str = "chunks_fts"
    ) -> list[tuple[int, float]]:
        scope = limiting(scope)
        if scope is None:
            rows = self._db.execute(
                f"SELECT rowid, bm25({table}, 1.0, ?) FROM {table} WHERE {table} MATCH ?"
                f" ORDER BY bm25({table}, 1.0, ?) LIMIT ?",
                (HEADING_WEIGHT, expression, HEADING_WEIGHT, limit),
            )
        else:
            # The matches first, then each one's source (CROSS JOIN keeps that order): a
            # `rowid IN (…)` filter makes FTS5 run the MATCH once per allowed rowid, which
            # took minutes a question on the 367-chunk sample.
            rows = self._db.execute(
                f"SELECT {table}.rowid, bm25({table}, 1.0, ?) FROM {table}"
                f" CROSS JOIN chunks c ON c.id = {table}.rowid"
                f" WHERE {table} MATCH ? AND citebot_in_scope(c.source, ?)"
                f" ORDER BY bm25({table}, 1.0, ?) LIMIT ?",
                (HEADING_WEIGHT, expression, scope.regex.pattern, HEADING_WEIGHT, limit),
            )
        return [(int(r[0]), -float(r[1])) for r in rows]

    def lexical(
        self, query: LexicalQuery, k: int, *, scope: Scope | None = None, chunks: dict[str, Chunk] | None = None
    ) -> list[tuple[str, float]]:
        """FTS5's ranking (a group of single words from the postings in memory once they
        are built: the same scores); with `chunks`, the ranked chunks are read into it in the
        statement that names them (fusion reads them anyway; a retrieval reads them here,
        while the dense arm's worker is still busy)."""
        scores: dict[int, float] = {}
        postings = self._postings() if query.groups else None
        for group in query.groups:
            if not group.terms:
                continue
            if group.stemmed:
                terms = [" ".join(s) for s in map(query_stems, group.terms) if s]
                table = "chunks_stems"
            else:
                terms, table = list(group.terms), "chunks_fts"
            if not terms:
                continue
            if postings is not None and all(words(t) == [t] for t in terms):  # each as the index cut it
                ranked = postings.tables[table].top(terms, LEXICAL_GROUP_LIMIT, postings.allowed(limiting(scope)))
            else:
                ranked = self._match(" OR ".join(f'"{t}"' for t in terms), LEXICAL_GROUP_LIMIT, scope, table)
            for rowid, score in ranked:
                scores[rowid] = scores.get(rowid, 0.0) + group.weight * score
        for phrase, weight in query.phrases:
            for rowid, score in self._match(f'text : "{phrase}"', LEXICAL_GROUP_LIMIT, scope):
                scores[rowid] = scores.get(rowid, 0.0) + weight * score
        top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        return self._ids_for(top, chunks)

    def _postings(self) -> Postings | None:
        """The postings of the collection as it is now, or None (FTS5 answers); may start
        their build on a background thread (search/embedded_postings.py)."""
        return self._keeper.for_read(self._collection_version(), self._build_postings_later)

    def _build_postings_later(self, version: tuple[int, int]) -> None:
        threading.Thread(target=self.build_postings, args=(version[1],), name="citebot-postings", daemon=True).start()

    def build_postings(self, generation: int | None = None) -> None:
        """Build the postings of the collection as it is now (a benchmark calls this to
        measure them at once; reads start it on a thread). A failure leaves FTS5 answering."""
        keeper = self._keeper
        # The count of this store's writes before the read: one after it would key a read that
        # missed a write as of that write (without the counter row, the only key that moves).
        generation = keeper.generation if generation is None else generation
        postings = None
        try:
            version, rows, sources = self._read_for_postings()
            postings = Postings((version, generation), rows, sources, HEADING_WEIGHT)
        except Exception as exc:  # noqa: BLE001 - a daemon thread: nothing may escape it; FTS5 answers
            log.warning("the lexical postings were not built (FTS5 goes on answering): %s", exc)
        finally:
            keeper.install(postings)

    def _read_for_postings(self) -> tuple[int, dict[str, list], dict[int, str]]:
        """The tables' content and the chunks' sources in one read transaction (one
        snapshot), and the version it is of."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                version = self._collection_version()
                rows = {
                    t: list(self._db.execute(f"SELECT id, c0, c1 FROM {t}_content")) for t in embedded_postings.TABLES
                }
                sources = dict(self._db.execute("SELECT id, source FROM chunks"))
            finally:
                self._db.execute("COMMIT")
        return version, rows, sources

    def _lexical_changed(self) -> None:
        """This store wrote chunks: the vocabularies and postings read before are of another version."""
        self._vocab_cache.clear()
        self._keeper.changed()

    def _ids_for(
        self, ranked: list[tuple[int, float]], chunks: dict[str, Chunk] | None = None
    ) -> list[tuple[str, float]]:
        """The ranked rows as chunk ids; with `chunks`, the chunks themselves read into it by
        the same statement."""
        if not ranked:
            return []
        marks = ",".join("?" * len(ranked))
        rowids = [r for r, _ in ranked]
        if chunks is None:
            ids = dict(self._db.execute(f"SELECT id, chunk_id FROM chunks WHERE id IN ({marks})", rowids))
        else:
            read = {
                r[0]: self._chunk(r[1:])
                for r in self._db.execute(f"SELECT id, {self._CHUNK_COLS} FROM chunks WHERE id IN ({marks})", rowids)
            }
            chunks.update((c.chunk_id, c) for c in read.values())
            ids = {r: c.chunk_id for r, c in read.items()}
        return [(ids[r], s) for r, s in ranked if r in ids]

    def phrase_matches(self, phrase: Sequence[str], limit: int, *, scope: Scope | None = None) -> list[str]:
        rows = self._match('text : "' + " ".join(phrase) + '"', limit + 1, scope)
        return [cid for cid, _ in self._ids_for(rows)]

    def phrase_matches_many(
        self, phrases: Sequence[Sequence[str]], limit: int, *, scope: Scope | None = None
    ) -> list[list[str]]:
        """phrase_matches for each phrase, shortest first: a phrase that holds a shorter
        one no chunk holds is held by no chunk either, and is not read (on the rust-doc
        questions most candidates are such; docs/decisions/0048-lexical-stage-cost.md)."""
        out: list[list[str]] = [[] for _ in phrases]
        unheld: set[tuple[str, ...]] = set()
        for i in sorted(range(len(phrases)), key=lambda i: len(phrases[i])):
            phrase = tuple(phrases[i])
            n = len(phrase)
            if any(phrase[a:b] in unheld for a in range(n) for b in range(a + 1, n + 1)):
                continue
            out[i] = self.phrase_matches(phrase, limit, scope=scope)
            if not out[i]:
                unheld.add(phrase)
        return out

    def spelling_candidates(self, terms: Sequence[str], *, scope: Scope | None = None) -> dict[str, list[str]]:
        """Words of the (scoped) vocabulary of about the right length sharing the first or
        second letter, in order: looked up in an index of the vocabulary by length and
        letter, built once per collection version (a scan of it took 5 ms a word at 13,685
        words: docs/decisions/0058-lexical-postings-in-memory.md)."""
        out: dict[str, list[str]] = {}
        index = self._spelling_index(scope)
        for term in dict.fromkeys(terms):
            near: set[str] = set()
            for n in range(len(term) - SPELLING_MAX_EDITS, len(term) + SPELLING_MAX_EDITS + 1):
                near.update(index.get((n, 0, term[:1]), ()))
                near.update(index.get((n, 1, term[1:2]), ()))
            near.discard(term)
            out[term] = sorted(near)
        return out

    def _spelling_index(self, scope: Scope | None) -> dict[tuple[int, int, str], list[str]]:
        """The vocabulary's words by (length, 0, first letter) and (length, 1, second letter)."""
        scope = limiting(scope)
        with self._lock:
            key = (self._collection_version(), scope.key if scope is not None else ())
            if key not in self._vocab_cache:
                if len(self._vocab_cache) >= VOCAB_CACHE_SCOPES:
                    self._vocab_cache.clear()
                index: dict[tuple[int, int, str], list[str]] = {}
                for w in self.vocabulary(scope=scope):
                    index.setdefault((len(w), 0, w[:1]), []).append(w)
                    index.setdefault((len(w), 1, w[1:2]), []).append(w)
                self._vocab_cache[key] = index
            return self._vocab_cache[key]

    def doc_freqs(self, terms: Sequence[str], *, scope: Scope | None = None) -> dict[str, int]:
        if not terms:
            return {}
        scope = limiting(scope)
        marks = ",".join("?" * len(terms))
        if scope is None:
            found = dict(self._db.execute(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", list(terms)))
        else:
            found = dict(
                self._db.execute(
                    f"SELECT term, count(DISTINCT doc) FROM temp.chunks_instances WHERE term IN ({marks})"
                    f" AND doc IN ({_IN_SCOPE}) GROUP BY term",
                    [*terms, scope.regex.pattern],
                )
            )
        return {t: int(found.get(t, 0)) for t in terms}

    def term_stats(
        self,
        terms: Sequence[str],
        *,
        scope: Scope | None = None,
        probes: Sequence[Sequence[str]] = (),
        limit: int = 0,
        held: dict[tuple[str, ...], list[str]] | None = None,
    ) -> tuple[dict[str, int], int]:
        """The two reads; `held` is left as it is (the caller probes what it still needs,
        fewer than asked: docs/decisions/0048-lexical-stage-cost.md)."""
        return (self.doc_freqs(terms, scope=scope) if terms else {}), self.chunk_count(scope=scope)

    def vocabulary(self, *, scope: Scope | None = None) -> set[str]:
        """Every indexed term (for typo correction); under a scope, those of its chunks."""
        scope = limiting(scope)
        if scope is None:
            return {r[0] for r in self._db.execute("SELECT term FROM chunks_vocab")}
        return {
            r[0]
            for r in self._db.execute(
                f"SELECT DISTINCT term FROM temp.chunks_instances WHERE doc IN ({_IN_SCOPE})", (scope.regex.pattern,)
            )
        }
