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

Beside it: the schema's migrations (search/embedded_migrations.py), the shared connection
and scope predicate (search/embedded_connection.py), the lexical reads
(search/embedded_lexical.py), the rows of Slack installations (search/embedded_installs.py).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from search.embedded_connection import SerialConnection, in_scope
from search.embedded_dense import DenseReads
from search.embedded_installs import InstallRows
from search.embedded_lexical import LexicalReads
from search.embedded_migrations import migrate, stems_written, write_pending_stems, write_stems
from search.embedded_postings import PostingsKeeper
from search.errors import IngestLockedError, ModelMismatchError, StoreError
from search.scope import Scope, limiting
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

log = logging.getLogger("citebot.search")

DB_NAME = "citebot.sqlite3"
# How long a statement waits for another process's write (an ingest's document, a schema
# step) before it fails; a store's first open after an upgrade may rewrite tables for ~1 s
# per 10,000 chunks (docs/operating.md, Upgrades).
BUSY_TIMEOUT_MS = 10_000
LOCK_NAME = "ingest.lock"


def _sections_json(c: Chunk) -> str | None:
    data = sections_as_data(c.sections)
    return None if data is None else json.dumps(data, ensure_ascii=False)


class EmbeddedStore(DenseReads, LexicalReads, InstallRows):
    """SQLite + FTS5 + numpy store in one directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.directory / DB_NAME, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"cannot open the embedded store at {self.directory}: {exc}; set CITEBOT_STORE to a writable directory"
            ) from exc
        self._lock = threading.RLock()
        self._db = SerialConnection(self._db, self._lock)  # type: ignore[assignment]  # a proxy
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        try:
            migrate(self._db, self._lock)
            write_pending_stems(self._db, self._lock)
        except sqlite3.OperationalError as exc:
            self._db.close()
            raise StoreError(
                f"cannot bring the embedded store at {self.directory} up to this version of citebot: {exc}. "
                "If another citebot process holds it (an ingest, or the first open after an upgrade, which "
                "rewrites its tables: about 1 s per 10,000 chunks), run this again when it is done; if the "
                "directory is read-only, open it once where it can be written"
            ) from exc
        self._db.create_function("citebot_in_scope", 2, in_scope, deterministic=True)
        # Per-chunk term instances, for document frequencies and the vocabulary under a scope
        # (chunks_vocab counts the whole collection). A temp table: nothing is stored.
        self._db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_instances USING fts5vocab(main, chunks_fts, 'instance')"
        )
        self._content: tuple[int, int] | None = None  # (data_version, content version) last read
        self._counter_warned = False
        self._matrix: tuple[int, np.ndarray, np.ndarray, list[str], list[str]] | None = None
        self._masks: dict[tuple[int, tuple[str, ...]], np.ndarray] = {}
        self._scan = None
        self._scan_reads = (None, 0)
        self._vocab_cache: dict[tuple[int, tuple[str, ...]], dict[tuple[int, int, str], list[str]]] = {}
        self._keeper = PostingsKeeper()

    def _collection_version(self) -> int:
        """The collection's content version, which the caches (vector matrix, scope masks,
        postings, spelling index) are keyed on: m014's counter, which only writes to what a
        search reads move (search/embedded_migrations.py). Read again only when another
        connection has committed (PRAGMA data_version moved), so a turn or feedback written
        beside a server costs one read of it, not a reload
        (docs/decisions/0064-collection-content-version.md)."""
        with self._lock:
            moved = int(self._db.execute("PRAGMA data_version").fetchone()[0])
            if self._content is None or self._content[0] != moved:
                row = self._db.execute("SELECT value FROM meta WHERE key = 'content_version'").fetchone()
                # Without the counter (its row deleted or rewritten by hand) every commit counts,
                # as before it.
                counter = self._counter(row[0]) if row else None
                self._content = (moved, counter if counter is not None else -1 - moved)
            return self._content[1]

    def _counter(self, value: object) -> int | None:
        """The content version's counter as stored, or None for a value that is not one
        (logged once per store)."""
        try:
            return int(str(value))
        except ValueError:
            if not self._counter_warned:
                self._counter_warned = True
                log.warning(
                    "content_version in %s is %r, not a counter: every commit counts as a write", self.directory, value
                )
            return None

    def _collection_written(self) -> None:
        """This store wrote the collection (its own commits leave data_version as it is)."""
        self._content = None
        self._matrix = None
        self._lexical_changed()

    # -- stamp ----------------------------------------------------------------------------
    def stamp(self) -> ModelStamp | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'model_stamp'").fetchone()
        if row is None:
            return None
        return ModelStamp.from_dict(json.loads(row[0]))

    def open_for(self, stamp: ModelStamp) -> None:
        with self._lock:
            current = self.stamp()
            if current is None:
                value = json.dumps(stamp.as_dict())
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('model_stamp', ?)", (value,))
                return
            if not stamp.serves(current):
                raise ModelMismatchError(
                    f"the store at {self.directory} was built with {current.describe()}, "
                    f"but citebot is configured with {stamp.describe()}; re-ingest into a new "
                    "CITEBOT_STORE or configure the model the store was built with"
                )

    # -- writes ---------------------------------------------------------------------------
    def document_hashes(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT source, content_hash FROM documents"))

    def replace_document(self, doc: DocumentRecord, chunks: Sequence[Chunk], windows: Sequence[Window]) -> None:
        stamp = self.stamp()
        if stamp is None:
            raise StoreError("the store has no model stamp; call open_for(stamp) before writing")
        stamp.check_widths(windows)
        with self._lock:
            now = datetime.now(UTC).isoformat()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                # A chunk whose text this document already held keeps the time it last changed.
                kept = dict(
                    self._db.execute(
                        "SELECT text_hash, changed_at FROM chunks WHERE source = ?", (doc.source,)
                    ).fetchall()
                )
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
                        " page, text, tokens, overlap_prev, overlap_next, superseded, url, anchor,"
                        " text_hash, changed_at, sections)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            c.chunk_id,
                            c.doc_id,
                            c.source,
                            c.ordinal,
                            json.dumps(list(c.heading_path), ensure_ascii=False),
                            c.page,
                            c.text,
                            c.tokens,
                            c.overlap_prev,
                            c.overlap_next,
                            int(c.superseded),
                            c.url,
                            c.anchor,
                            (h := text_hash(c.text)),
                            kept.get(h, now),
                            _sections_json(c),
                        ),
                    )
                    rowid = int(cur.lastrowid or 0)
                    rowids[c.chunk_id] = rowid
                    self._db.execute(
                        "INSERT INTO chunks_fts (rowid, text, heading) VALUES (?, ?, ?)",
                        (rowid, c.text, c.heading_text()),
                    )
                    write_stems(self._db, rowid, c.text, [c.heading_text()])
                    stems_written(self._db, rowid)
                self._db.executemany(
                    "INSERT INTO windows VALUES (?, ?, ?, ?, ?)",
                    [
                        (rowids[w.chunk_id], w.index, w.start, w.end, np.asarray(w.vector, dtype=np.float32).tobytes())
                        for w in windows
                    ],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._collection_written()

    def _delete_source(self, source: str) -> None:
        ids = [
            r[0]
            for r in self._db.execute(
                "SELECT c.id FROM chunks c JOIN documents d ON c.doc_id = d.doc_id WHERE d.source = ?", (source,)
            )
        ]
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
            self._collection_written()

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
            raise StoreError(
                f"cannot open the ingest lock {path}: {exc}; set CITEBOT_STORE to a writable directory"
            ) from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                raise IngestLockedError(
                    f"another ingest is writing the store at {self.directory} ({holder}); "
                    "wait for it to finish, then run this one again"
                ) from None
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
        " overlap_prev, overlap_next, superseded, url, anchor, sections"
    )

    @staticmethod
    def _chunk(row: tuple) -> Chunk:
        return Chunk(
            chunk_id=row[0],
            doc_id=row[1],
            source=row[2],
            heading_path=tuple(json.loads(row[3])),
            page=row[4],
            ordinal=row[5],
            text=row[6],
            tokens=row[7],
            overlap_prev=row[8],
            overlap_next=row[9],
            superseded=bool(row[10]),
            url=row[11],
            anchor=row[12],
            sections=sections_from_data(json.loads(row[13]) if row[13] else None),
        )

    def iter_chunks(self) -> list[Chunk]:
        rows = self._db.execute(f"SELECT {self._CHUNK_COLS} FROM chunks ORDER BY source, ordinal").fetchall()
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

    def chunk_versions(self, sources: Sequence[str]) -> list[ChunkVersion]:
        out: list[ChunkVersion] = []
        wanted = sorted(set(sources))
        for start in range(0, len(wanted), 500):  # SQLite's bound on host parameters
            part = wanted[start : start + 500]
            # A chunk an older citebot wrote after the upgrade has no hash: computed here.
            out.extend(
                ChunkVersion(cid, src, h or text_hash(text or ""), at)
                for cid, src, h, at, text in self._db.execute(
                    "SELECT chunk_id, source, text_hash, changed_at,"
                    " CASE WHEN text_hash IS NULL THEN text END FROM chunks"
                    f" WHERE source IN ({','.join('?' * len(part))})",
                    part,
                )
            )
        return out

    def chunk_count(self, *, scope: Scope | None = None) -> int:
        scope = limiting(scope)
        if scope is None:
            return int(self._db.execute("SELECT count(*) FROM chunks").fetchone()[0])
        return int(
            self._db.execute(
                "SELECT count(*) FROM chunks WHERE citebot_in_scope(source, ?)", (scope.regex.pattern,)
            ).fetchone()[0]
        )

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
                "SELECT at, user, value FROM feedback WHERE turn_id = ? ORDER BY rowid", (turn_id,)
            )
        ]
        return record

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT INTO feedback VALUES (?, ?, ?, ?)", (turn_id, at, user, value))

    def purge_turns(
        self, before: str | None, users: Sequence[str], limit: int | None = None, teams: Sequence[str] = ()
    ) -> list[dict]:
        """Delete the turns created before `before`, asked by one of `users` or in one of
        `teams` (an install's owner: bot/slack/workspace.py), oldest
        first, at most `limit`, with their feedback; their user, channel and thread."""
        conditions, args = [], []
        if before is not None:
            conditions.append("created_at < ?")
            args.append(before)
        for key, values in (("user", users), ("team", teams)):
            if values:
                conditions.append(f"json_extract(record, '$.{key}') IN ({','.join('?' * len(values))})")
                args.extend(values)
        if not conditions:
            return []
        query = f"SELECT turn_id, record FROM turns WHERE {' OR '.join(conditions)} ORDER BY created_at"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                rows = self._db.execute(query, args).fetchall()
                ids = [(r[0],) for r in rows]
                self._db.executemany("DELETE FROM turns WHERE turn_id = ?", ids)
                self._db.executemany("DELETE FROM feedback WHERE turn_id = ?", ids)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        gone = []
        for _, raw in rows:
            record = json.loads(raw)
            gone.append({k: record.get(k) for k in ("user", "channel", "thread")})
        return gone

    def turns_since(self, since_iso: str) -> Iterator[dict]:
        """Turns created at or after `since_iso`, oldest first (the index on created_at)."""
        rows = self._db.execute(
            "SELECT turn_id, created_at, record FROM turns WHERE created_at >= ? ORDER BY created_at, turn_id",
            (since_iso,),
        ).fetchall()
        feedback: dict[str, list[dict]] = {}
        for turn_id, at, user, value in self._db.execute(
            "SELECT f.turn_id, f.at, f.user, f.value FROM feedback f JOIN turns t"
            " ON t.turn_id = f.turn_id WHERE t.created_at >= ? ORDER BY f.rowid",
            (since_iso,),
        ):
            feedback.setdefault(turn_id, []).append({"at": at, "user": user, "value": value})
        for turn_id, created_at, raw in rows:
            record = {**json.loads(raw), "turn_id": turn_id, "created_at": created_at}
            record["feedback"] = feedback.get(turn_id, [])
            yield record

    # -- collection statistics ------------------------------------------------------------
    def read_stat(self, key: str) -> dict | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", ("stat:" + key,)).fetchone()
        return json.loads(row[0]) if row else None

    def write_stat(self, key: str, value: dict) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", ("stat:" + key, json.dumps(value)))

    def close(self) -> None:
        self._db.close()
