"""The embedded store, citebot's default: one directory, SQLite + FTS5 + numpy.

Documents, chunks, model stamp, window vectors and the turn log live in one SQLite
file (WAL, so readers never wait for an ingest). FTS5 gives BM25 and exact phrases;
vectors are searched exactly with numpy, a chunk scoring by its best window.
Each document is replaced in one transaction, so an interrupted ingest leaves every
document either as it was or as it is now, and the next run completes the rest; the same
transaction drops the collection statistics (the gate's calibration), so a run killed
before it measured them again leaves none rather than the old collection's, and the next
run measures them. One ingest at a time: `ingest_lock()` holds an exclusive fcntl lock on
`ingest.lock` in the store's directory, and a second ingest is refused with the pid of
the one running (readers never take it).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

import numpy as np

from search.errors import DimensionError, IngestLockedError, ModelMismatchError, StoreError
from search.scope import Scope, limiting
from search.text import query_stems, stems
from search.types import Chunk, DocumentRecord, LexicalQuery, ModelStamp, Window, WindowScore

log = logging.getLogger("citebot.search")

DB_NAME = "citebot.sqlite3"
LOCK_NAME = "ingest.lock"

# How many FTS5 matches one lexical group may contribute before fusion. The arms hand
# fusion at most a few dozen candidates; 500 leaves room for a common term on a 10k-chunk
# corpus without sorting the whole index.
LEXICAL_GROUP_LIMIT = 500

# BM25 weight of the heading path against the passage text (1.0). Headings name what a
# section is about ("Per diem", "Escalation"), but they repeat over every chunk of a
# long section, so they count for half.
HEADING_WEIGHT = 0.5

# Spelling candidates lie within this many edits (search/retrieve.py's typo fixer).
SPELLING_MAX_EDITS = 2
# Vocabularies kept in memory for spelling (one per scope); a new version clears them.
VOCAB_CACHE_SCOPES = 16

# The scope predicate in SQL: citebot_in_scope(source, regex) is 1 when the scope's regex
# (search.scope.Scope.regex) matches the whole source path.
_IN_SCOPE = "SELECT id FROM chunks WHERE citebot_in_scope(source, ?)"


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.DOTALL)


def _in_scope(source: str, pattern: str) -> int:
    return int(_regex(pattern).fullmatch(source) is not None)


class _Rows(list):
    """A statement's rows, read to the end: fetchone(), fetchall() and lastrowid as on a cursor."""

    lastrowid: int | None = None

    def fetchone(self):
        return self[0] if self else None

    def fetchall(self) -> list:
        return list(self)


class _SerialConnection:
    """The store's one SQLite connection, shared by threads, one statement at a time.

    A statement that calls back into Python (citebot_in_scope, the scope predicate) needs the
    GIL while SQLite holds the connection's mutex; a second thread that holds the GIL and
    binds or steps a statement on the same connection waits for that mutex: both wait for
    ever (two scoped Slack turns at once hung tests/test_slack_scopes.py in CI). So every
    statement runs, and is read to the end, under the store's lock; waiting for a Python
    lock gives the GIL up."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock

    def execute(self, sql: str, params: Sequence = ()) -> _Rows:
        with self._lock:
            cursor = self._db.execute(sql, params)
            rows = _Rows(cursor.fetchall())
            rows.lastrowid = cursor.lastrowid
            return rows

    def executemany(self, sql: str, rows) -> None:
        with self._lock:
            self._db.executemany(sql, rows)

    def create_function(self, *args, **kwargs) -> None:
        with self._lock:
            self._db.create_function(*args, **kwargs)

    def close(self) -> None:
        with self._lock:
            self._db.close()


_MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = []


def migration(fn: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
    """Register a schema step; steps run once each, in the order they are defined."""
    _MIGRATIONS.append((fn.__name__, fn))
    return fn


def _run_script(db: sqlite3.Connection, sql: str) -> None:
    """Statement by statement: executescript() would commit the migration's transaction."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    _run_script(db, 
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE documents (
            doc_id TEXT PRIMARY KEY, source TEXT UNIQUE NOT NULL, content_hash TEXT NOT NULL,
            title TEXT NOT NULL, format TEXT NOT NULL);
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY, chunk_id TEXT UNIQUE NOT NULL,
            doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
            source TEXT NOT NULL, ordinal INTEGER NOT NULL, heading_path TEXT NOT NULL,
            page TEXT, text TEXT NOT NULL, tokens INTEGER NOT NULL,
            overlap_prev INTEGER NOT NULL, overlap_next INTEGER NOT NULL);
        CREATE INDEX chunks_by_doc ON chunks(doc_id, ordinal);
        CREATE TABLE windows (
            chunk_rowid INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
            vector BLOB NOT NULL, PRIMARY KEY (chunk_rowid, idx));
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            text, heading, tokenize = 'unicode61 remove_diacritics 2');
        CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');
        """
    )


@migration
def m002_turns(db: sqlite3.Connection) -> None:
    _run_script(db, 
        """
        CREATE TABLE turns (turn_id TEXT PRIMARY KEY, created_at TEXT NOT NULL,
                            record TEXT NOT NULL);
        CREATE TABLE feedback (turn_id TEXT NOT NULL, at TEXT NOT NULL, user TEXT,
                               value TEXT NOT NULL);
        CREATE INDEX feedback_by_turn ON feedback(turn_id);
        """
    )


@migration
def m003_superseded(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE chunks ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0")


@migration
def m004_links(db: sqlite3.Connection) -> None:
    """Where a chunk opens (search/links.py). Chunks stored before have neither; ingest
    writes documents that have them again (ingest.planning.LINKS_VERSION)."""
    db.execute("ALTER TABLE chunks ADD COLUMN url TEXT")
    db.execute("ALTER TABLE chunks ADD COLUMN anchor TEXT")


@migration
def m005_stems(db: sqlite3.Connection) -> None:
    """The stemmed lexical fields (search.text.stems): the term groups' BM25 reads them;
    phrases, document frequencies and the vocabulary keep reading chunks_fts's words.
    Filled from the stored chunks, so a store ingested before needs no re-ingest."""
    db.execute("CREATE VIRTUAL TABLE chunks_stems USING fts5("
               "stems, heading, tokenize = 'unicode61 remove_diacritics 2')")
    for rowid, text, heading_path in db.execute("SELECT id, text, heading_path FROM chunks").fetchall():
        _write_stems(db, rowid, text, json.loads(heading_path))


def _write_stems(db: sqlite3.Connection, rowid: int, text: str, heading_path: Sequence[str]) -> None:
    """One chunk's row of chunks_stems: the stems of its text and of its heading path."""
    db.execute("INSERT INTO chunks_stems (rowid, stems, heading) VALUES (?, ?, ?)",
               (rowid, " ".join(stems(text)), " ".join(stems(" ".join(heading_path)))))


@migration
def m006_stems_follow_chunks(db: sqlite3.Connection) -> None:
    """Triggers that keep chunks_stems true to chunks whoever writes them: a citebot from
    before m005 (a downgrade) writes chunks but no stems. A deleted chunk takes its stems
    row with it; an inserted one is listed in stems_pending until its stems are written,
    by this version's ingest in the same transaction or, for one an older version wrote,
    when the store is next opened (EmbeddedStore._stem_pending)."""
    # One statement each: a trigger's body holds semicolons, which _run_script splits on.
    db.execute("CREATE TABLE stems_pending (chunk_rowid INTEGER PRIMARY KEY)")
    db.execute("CREATE TRIGGER chunks_stems_pending AFTER INSERT ON chunks BEGIN"
               " INSERT OR IGNORE INTO stems_pending VALUES (new.id); END")
    db.execute("CREATE TRIGGER chunks_stems_delete AFTER DELETE ON chunks BEGIN"
               " DELETE FROM chunks_stems WHERE rowid = old.id;"
               " DELETE FROM stems_pending WHERE chunk_rowid = old.id; END")


class EmbeddedStore:
    """SQLite + FTS5 + numpy store in one directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.directory / DB_NAME, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"cannot open the embedded store at {self.directory}: {exc}; "
                "set CITEBOT_STORE to a writable directory"
            ) from exc
        self._lock = threading.RLock()
        self._db = _SerialConnection(self._db, self._lock)  # type: ignore[assignment]  # a proxy
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._migrate()
        self._stem_pending()
        self._db.create_function("citebot_in_scope", 2, _in_scope, deterministic=True)
        # Per-chunk term instances, for document frequencies and the vocabulary under a scope
        # (chunks_vocab counts the whole collection). A temp table: nothing is stored.
        self._db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_instances"
                         " USING fts5vocab(main, chunks_fts, 'instance')")
        self._matrix: tuple[int, np.ndarray, np.ndarray, list[str], list[str]] | None = None
        self._masks: dict[tuple[int, tuple[str, ...]], np.ndarray] = {}
        self._vocab_cache: dict[tuple[int, tuple[str, ...]], list[str]] = {}

    # -- schema ---------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY)")
            done = {r[0] for r in self._db.execute("SELECT name FROM _migrations")}
            for name, step in _MIGRATIONS:
                if name in done:
                    continue
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    step(self._db)
                    self._db.execute("INSERT INTO _migrations VALUES (?)", (name,))
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise

    def _stem_pending(self) -> None:
        """Write the stems of chunks that an older citebot stored without them (m006)."""
        with self._lock:
            if self._db.execute("SELECT 1 FROM stems_pending LIMIT 1").fetchone() is None:
                return
            self._db.execute("BEGIN IMMEDIATE")
            try:
                rows = self._db.execute(
                    "SELECT c.id, c.text, c.heading_path FROM stems_pending p"
                    " JOIN chunks c ON c.id = p.chunk_rowid").fetchall()
                for rowid, text, heading_path in rows:
                    self._db.execute("DELETE FROM chunks_stems WHERE rowid = ?", (rowid,))
                    _write_stems(self._db, rowid, text, json.loads(heading_path))
                self._db.execute("DELETE FROM stems_pending")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        log.info("wrote the stems of %d chunks stored by an older citebot", len(rows))

    # -- stamp ----------------------------------------------------------------------------
    def stamp(self) -> ModelStamp | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'model_stamp'").fetchone()
        if row is None:
            return None
        data = json.loads(row[0])
        return ModelStamp(data["name"], int(data["dims"]), data["checksum"])

    def open_for(self, stamp: ModelStamp) -> None:
        with self._lock:
            current = self.stamp()
            if current is None:
                value = json.dumps(
                    {"name": stamp.name, "dims": stamp.dims, "checksum": stamp.checksum}
                )
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('model_stamp', ?)", (value,))
                return
            if current != stamp:
                raise ModelMismatchError(
                    f"the store at {self.directory} was built with {current.describe()}, "
                    f"but citebot is configured with {stamp.describe()}; re-ingest into a new "
                    "CITEBOT_STORE or configure the model the store was built with"
                )

    # -- writes ---------------------------------------------------------------------------
    def document_hashes(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT source, content_hash FROM documents"))

    def replace_document(
        self, doc: DocumentRecord, chunks: Sequence[Chunk], windows: Sequence[Window]
    ) -> None:
        stamp = self.stamp()
        if stamp is None:
            raise StoreError("the store has no model stamp; call open_for(stamp) before writing")
        stamp.check_widths(windows)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._delete_source(doc.source)
                self._drop_stats()
                self._db.execute(
                    "INSERT INTO documents VALUES (?, ?, ?, ?, ?)",
                    (doc.doc_id, doc.source, doc.content_hash, doc.title, doc.format),
                )
                rowids: dict[str, int] = {}
                for c in chunks:
                    cur = self._db.execute(
                        "INSERT INTO chunks (chunk_id, doc_id, source, ordinal, heading_path,"
                        " page, text, tokens, overlap_prev, overlap_next, superseded, url, anchor)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            c.chunk_id, c.doc_id, c.source, c.ordinal,
                            json.dumps(list(c.heading_path), ensure_ascii=False), c.page, c.text,
                            c.tokens, c.overlap_prev, c.overlap_next, int(c.superseded),
                            c.url, c.anchor,
                        ),
                    )
                    rowid = int(cur.lastrowid or 0)
                    rowids[c.chunk_id] = rowid
                    self._db.execute(
                        "INSERT INTO chunks_fts (rowid, text, heading) VALUES (?, ?, ?)",
                        (rowid, c.text, " ".join(c.heading_path)),
                    )
                    _write_stems(self._db, rowid, c.text, c.heading_path)
                    self._db.execute("DELETE FROM stems_pending WHERE chunk_rowid = ?", (rowid,))
                self._db.executemany(
                    "INSERT INTO windows VALUES (?, ?, ?, ?, ?)",
                    [
                        (rowids[w.chunk_id], w.index, w.start, w.end,
                         np.asarray(w.vector, dtype=np.float32).tobytes())
                        for w in windows
                    ],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._matrix = None
            self._vocab_cache.clear()

    def _delete_source(self, source: str) -> None:
        ids = [r[0] for r in self._db.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON c.doc_id = d.doc_id"
            " WHERE d.source = ?", (source,))]
        self._db.executemany("DELETE FROM chunks_fts WHERE rowid = ?", [(i,) for i in ids])
        self._db.executemany("DELETE FROM windows WHERE chunk_rowid = ?", [(i,) for i in ids])
        self._db.executemany("DELETE FROM chunks WHERE id = ?", [(i,) for i in ids])
        self._db.execute("DELETE FROM documents WHERE source = ?", (source,))

    def delete_documents(self, sources: Iterable[str]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for source in sources:
                    self._delete_source(source)
                self._drop_stats()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._matrix = None
            self._vocab_cache.clear()

    def _drop_stats(self) -> None:
        """Statistics describe the collection they were measured on: a write ends them."""
        self._db.execute("DELETE FROM meta WHERE key LIKE 'stat:%'")

    def commit_ingest(self) -> None:
        """Each document is committed as it is written; nothing is pending here."""

    @contextmanager
    def ingest_lock(self) -> Iterator[None]:
        """Hold the store's ingest lock for one run; IngestLockedError if another run holds it.

        An fcntl lock on `ingest.lock`: the kernel releases it when its holder exits, killed
        or not, so a crashed ingest never leaves the store locked."""
        path = self.directory / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open the ingest lock {path}: {exc}; "
                             "set CITEBOT_STORE to a writable directory") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                raise IngestLockedError(
                    f"another ingest is writing the store at {self.directory} ({holder}); "
                    "wait for it to finish, then run this one again") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}, started {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC".encode(), 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    # -- reads ----------------------------------------------------------------------------
    _CHUNK_COLS = (
        "chunk_id, doc_id, source, heading_path, page, ordinal, text, tokens,"
        " overlap_prev, overlap_next, superseded, url, anchor"
    )

    @staticmethod
    def _chunk(row: tuple) -> Chunk:
        return Chunk(
            chunk_id=row[0], doc_id=row[1], source=row[2],
            heading_path=tuple(json.loads(row[3])), page=row[4], ordinal=row[5], text=row[6],
            tokens=row[7], overlap_prev=row[8], overlap_next=row[9], superseded=bool(row[10]),
            url=row[11], anchor=row[12],
        )

    def iter_chunks(self) -> list[Chunk]:
        rows = self._db.execute(
            f"SELECT {self._CHUNK_COLS} FROM chunks ORDER BY source, ordinal"
        ).fetchall()
        return [self._chunk(r) for r in rows]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        if not chunk_ids:
            return []
        marks = ",".join("?" * len(chunk_ids))
        rows = self._db.execute(
            f"SELECT {self._CHUNK_COLS} FROM chunks WHERE chunk_id IN ({marks})", list(chunk_ids)
        ).fetchall()
        by_id = {r[0]: self._chunk(r) for r in rows}
        return [by_id[i] for i in chunk_ids if i in by_id]

    def neighbours(self, chunk: Chunk) -> tuple[Chunk | None, Chunk | None]:
        rows = self._db.execute(
            f"SELECT {self._CHUNK_COLS} FROM chunks WHERE doc_id = ? AND ordinal IN (?, ?)",
            (chunk.doc_id, chunk.ordinal - 1, chunk.ordinal + 1),
        ).fetchall()
        by_ord = {r[5]: self._chunk(r) for r in rows}
        return by_ord.get(chunk.ordinal - 1), by_ord.get(chunk.ordinal + 1)

    def chunk_count(self, *, scope: Scope | None = None) -> int:
        scope = limiting(scope)
        if scope is None:
            return int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])
        return int(self._db.execute(
            "SELECT count(*) FROM chunks WHERE citebot_in_scope(source, ?)",
            (scope.regex.pattern,)).fetchone()[0])

    def _vectors(self) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
        with self._lock:
            # data_version moves when another process commits (an ingest beside a server).
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
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
                    if rows else np.zeros((0, dims), dtype=np.float32)
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
            allowed = {s: scope.allows(s) for s in set(sources)}
            mask = np.fromiter((allowed[s] for s in sources), dtype=bool, count=len(sources))
            self._masks[key] = mask
        return mask

    def dense(self, vector: np.ndarray, k: int, *, scope: Scope | None = None) -> list[tuple[str, float]]:
        scope = limiting(scope)
        with self._lock:
            matrix, owner, ids, sources = self._vectors()
            mask = self._scope_mask(scope, sources) if scope is not None and ids else None
        if not ids:
            return []
        if vector.shape != (matrix.shape[1],):
            raise DimensionError(
                f"query vector has width {vector.shape}, the store holds {matrix.shape[1]}"
            )
        scores = matrix @ vector.astype(np.float32)
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, scores)
        if mask is not None:
            best[~mask] = -np.inf  # outside the scope: never a candidate
            k = min(k, int(mask.sum()))
        top = np.argsort(-best, kind="stable")[:k]
        return [(ids[i], float(best[i])) for i in top]

    def window_scores(self, vector: np.ndarray, chunk_ids: Sequence[str]) -> dict[str, list[WindowScore]]:
        if not chunk_ids:
            return {}
        marks = ",".join("?" * len(chunk_ids))
        with self._lock:
            rows = self._db.execute(
                "SELECT c.chunk_id, w.start, w.end, w.vector FROM windows w"
                f" JOIN chunks c ON c.id = w.chunk_rowid WHERE c.chunk_id IN ({marks})"
                " ORDER BY w.chunk_rowid, w.idx", list(chunk_ids)).fetchall()
        if not rows:
            return {}
        matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        if vector.shape != (matrix.shape[1],):
            raise DimensionError(
                f"query vector has width {vector.shape}, the store holds {matrix.shape[1]}")
        scores = matrix @ vector.astype(np.float32)
        out: dict[str, list[WindowScore]] = {}
        for (cid, start, end, _), score in zip(rows, scores, strict=True):
            out.setdefault(cid, []).append(WindowScore(int(start), int(end), float(score)))
        return out

    def _match(self, expression: str, limit: int, scope: Scope | None = None,
               table: str = "chunks_fts") -> list[tuple[int, float]]:
        scope = limiting(scope)
        if scope is None:
            rows = self._db.execute(
                f"SELECT rowid, bm25({table}, 1.0, ?) FROM {table} WHERE {table} MATCH ?"
                f" ORDER BY bm25({table}, 1.0, ?) LIMIT ?",
                (HEADING_WEIGHT, expression, HEADING_WEIGHT, limit))
        else:
            # The matches first, then each one's source (CROSS JOIN keeps that order): a
            # `rowid IN (…)` filter makes FTS5 run the MATCH once per allowed rowid, which
            # took minutes a question on the 367-chunk sample.
            rows = self._db.execute(
                f"SELECT {table}.rowid, bm25({table}, 1.0, ?) FROM {table}"
                f" CROSS JOIN chunks c ON c.id = {table}.rowid"
                f" WHERE {table} MATCH ? AND citebot_in_scope(c.source, ?)"
                f" ORDER BY bm25({table}, 1.0, ?) LIMIT ?",
                (HEADING_WEIGHT, expression, scope.regex.pattern, HEADING_WEIGHT, limit))
        return [(int(r[0]), -float(r[1])) for r in rows]

    def lexical(self, query: LexicalQuery, k: int, *, scope: Scope | None = None) -> list[tuple[str, float]]:
        scores: dict[int, float] = {}
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
            expression = " OR ".join(f'"{t}"' for t in terms)
            for rowid, score in self._match(expression, LEXICAL_GROUP_LIMIT, scope, table):
                scores[rowid] = scores.get(rowid, 0.0) + group.weight * score
        for phrase, weight in query.phrases:
            for rowid, score in self._match(f'text : "{phrase}"', LEXICAL_GROUP_LIMIT, scope):
                scores[rowid] = scores.get(rowid, 0.0) + weight * score
        top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        return self._ids_for(top)

    def _ids_for(self, ranked: list[tuple[int, float]]) -> list[tuple[str, float]]:
        if not ranked:
            return []
        marks = ",".join("?" * len(ranked))
        ids = dict(self._db.execute(
            f"SELECT id, chunk_id FROM chunks WHERE id IN ({marks})", [r for r, _ in ranked]))
        return [(ids[r], s) for r, s in ranked if r in ids]

    def phrase_matches(self, phrase: Sequence[str], limit: int, *,
                       scope: Scope | None = None) -> list[str]:
        rows = self._match('text : "' + " ".join(phrase) + '"', limit + 1, scope)
        return [cid for cid, _ in self._ids_for(rows)]

    def phrase_matches_many(self, phrases: Sequence[Sequence[str]], limit: int, *,
                            scope: Scope | None = None) -> list[list[str]]:
        return [self.phrase_matches(p, limit, scope=scope) for p in phrases]

    def spelling_candidates(self, terms: Sequence[str], *,
                            scope: Scope | None = None) -> dict[str, list[str]]:
        """Words of the (scoped) vocabulary of about the right length sharing the first or
        second letter: an in-process scan of a vocabulary read once per collection version."""
        out: dict[str, list[str]] = {}
        vocab = self._vocabulary_cached(scope)
        for term in dict.fromkeys(terms):
            out[term] = [
                c for c in vocab
                if abs(len(c) - len(term)) <= SPELLING_MAX_EDITS and c != term
                and (c[:1] == term[:1] or c[1:2] == term[1:2])
            ]
        return out

    def _vocabulary_cached(self, scope: Scope | None) -> list[str]:
        scope = limiting(scope)
        with self._lock:
            version = int(self._db.execute("PRAGMA data_version").fetchone()[0])
            key = (version, scope.key if scope is not None else ())
            if key not in self._vocab_cache:
                if len(self._vocab_cache) >= VOCAB_CACHE_SCOPES:
                    self._vocab_cache.clear()
                self._vocab_cache[key] = sorted(self.vocabulary(scope=scope))
            return self._vocab_cache[key]

    def doc_freqs(self, terms: Sequence[str], *, scope: Scope | None = None) -> dict[str, int]:
        if not terms:
            return {}
        scope = limiting(scope)
        marks = ",".join("?" * len(terms))
        if scope is None:
            found = dict(self._db.execute(
                f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", list(terms)))
        else:
            found = dict(self._db.execute(
                f"SELECT term, count(DISTINCT doc) FROM temp.chunks_instances WHERE term IN ({marks})"
                f" AND doc IN ({_IN_SCOPE}) GROUP BY term", [*terms, scope.regex.pattern]))
        return {t: int(found.get(t, 0)) for t in terms}

    def vocabulary(self, *, scope: Scope | None = None) -> set[str]:
        """Every indexed term (for typo correction); under a scope, those of its chunks."""
        scope = limiting(scope)
        if scope is None:
            return {r[0] for r in self._db.execute("SELECT term FROM chunks_vocab")}
        return {r[0] for r in self._db.execute(
            f"SELECT DISTINCT term FROM temp.chunks_instances WHERE doc IN ({_IN_SCOPE})",
            (scope.regex.pattern,))}

    # -- turn log -------------------------------------------------------------------------
    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO turns VALUES (?, ?, ?)",
                (turn_id, created_at, json.dumps(record, ensure_ascii=False)),
            )

    def get_turn(self, turn_id: str) -> dict | None:
        row = self._db.execute("SELECT record FROM turns WHERE turn_id = ?", (turn_id,)).fetchone()
        if row is None:
            return None
        record = json.loads(row[0])
        record["feedback"] = [
            {"at": at, "user": user, "value": value}
            for at, user, value in self._db.execute(
                "SELECT at, user, value FROM feedback WHERE turn_id = ? ORDER BY rowid", (turn_id,))
        ]
        return record

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT INTO feedback VALUES (?, ?, ?, ?)", (turn_id, at, user, value))

    # -- collection statistics ------------------------------------------------------------
    def read_stat(self, key: str) -> dict | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", ("stat:" + key,)).fetchone()
        return json.loads(row[0]) if row else None

    def write_stat(self, key: str, value: dict) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", ("stat:" + key, json.dumps(value)))

    def close(self) -> None:
        self._db.close()
