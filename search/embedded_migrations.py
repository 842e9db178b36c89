"""The embedded store's schema: a registry of named migrations, run once each, in order.

`migrate()` runs the steps a store has not had yet, each in its own transaction, and
records them in `_migrations`; `write_pending_stems()` writes the stems of chunks an older
citebot stored without them (m006), cut otherwise (m011, m012) or wrote after an upgrade
(m013). m014 counts the writes to the collection (the caches' key). A new schema step is a new `@migration` function appended at the end; steps
already shipped are never edited.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Callable, Sequence

from search.marks import MARK_SET
from search.text import TOKENIZE, stems, words
from search.types import heading_text, sections_from_data, text_hash

log = logging.getLogger("citebot.search")

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
    _run_script(
        db,
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
        """,
    )


@migration
def m002_turns(db: sqlite3.Connection) -> None:
    _run_script(
        db,
        """
        CREATE TABLE turns (turn_id TEXT PRIMARY KEY, created_at TEXT NOT NULL,
                            record TEXT NOT NULL);
        CREATE TABLE feedback (turn_id TEXT NOT NULL, at TEXT NOT NULL, user TEXT,
                               value TEXT NOT NULL);
        CREATE INDEX feedback_by_turn ON feedback(turn_id);
        """,
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
    db.execute(
        "CREATE VIRTUAL TABLE chunks_stems USING fts5(stems, heading, tokenize = 'unicode61 remove_diacritics 2')"
    )
    for rowid, text, heading_path in db.execute("SELECT id, text, heading_path FROM chunks").fetchall():
        write_stems(db, rowid, text, json.loads(heading_path))


def _heading_text(heading_path: str, sections: str | None) -> str:
    """A stored chunk's heading words (search.types.heading_text), from its JSON columns."""
    return heading_text(json.loads(heading_path), sections_from_data(json.loads(sections)) if sections else ())


def write_stems(db: sqlite3.Connection, rowid: int, text: str, heading_path: Sequence[str]) -> None:
    """One chunk's row of chunks_stems: the stems of its text and of its heading path."""
    db.execute(
        "INSERT INTO chunks_stems (rowid, stems, heading) VALUES (?, ?, ?)",
        (rowid, " ".join(stems(text)), " ".join(stems(" ".join(heading_path)))),
    )


@migration
def m006_stems_follow_chunks(db: sqlite3.Connection) -> None:
    """Triggers that keep chunks_stems true to chunks whoever writes them: a citebot from
    before m005 (a downgrade) writes chunks but no stems. A deleted chunk takes its stems
    row with it; an inserted one is listed in stems_pending until its stems are written,
    by this version's ingest in the same transaction or, for one an older version wrote,
    when the store is next opened (write_pending_stems)."""
    # One statement each: a trigger's body holds semicolons, which _run_script splits on.
    db.execute("CREATE TABLE stems_pending (chunk_rowid INTEGER PRIMARY KEY)")
    db.execute(
        "CREATE TRIGGER chunks_stems_pending AFTER INSERT ON chunks BEGIN"
        " INSERT OR IGNORE INTO stems_pending VALUES (new.id); END"
    )
    db.execute(
        "CREATE TRIGGER chunks_stems_delete AFTER DELETE ON chunks BEGIN"
        " DELETE FROM chunks_stems WHERE rowid = old.id;"
        " DELETE FROM stems_pending WHERE chunk_rowid = old.id; END"
    )


@migration
def m007_turns_by_time(db: sqlite3.Connection) -> None:
    """Retention deletes the oldest turns at each write: an index keeps that a range read."""
    db.execute("CREATE INDEX turns_by_created ON turns(created_at)")


@migration
def m008_chunk_sections(db: sqlite3.Connection) -> None:
    """The sections of a chunk that joins short ones (search.types.Chunk.sections), as JSON;
    NULL for a chunk of one section, as every chunk stored before is. Nothing is re-ingested:
    an older chunk keeps its one heading, which is right for it."""
    db.execute("ALTER TABLE chunks ADD COLUMN sections TEXT")


def migrate(db: sqlite3.Connection, lock: threading.RLock) -> None:
    """Run the registered steps this store has not had yet, each in one transaction."""
    with lock:
        db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY)")
        done = {r[0] for r in db.execute("SELECT name FROM _migrations")}
        for name, step in _MIGRATIONS:
            if name in done:
                continue
            db.execute("BEGIN IMMEDIATE")
            try:
                # Another process opening the store at the same moment may have run it since.
                if db.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone() is None:
                    step(db)
                    db.execute("INSERT INTO _migrations VALUES (?)", (name,))
                    # A step may rewrite what a search reads: it counts as a write (m014's counter).
                    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                        db.execute(BUMP)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise


def write_pending_stems(db: sqlite3.Connection, lock: threading.RLock) -> None:
    """Write the stems of chunks that an older citebot stored without them (m006), cut
    otherwise (m011, m012) or wrote after this version's migrations (m013), their headings'
    stems as an ingest writes them (Chunk.heading_text)."""
    listed = "SELECT chunk_rowid FROM stems_pending UNION SELECT chunk_rowid FROM stems_unchecked"
    with lock:
        if db.execute(f"{listed} LIMIT 1").fetchone() is None:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            rows = db.execute(f"SELECT id, text, heading_path, sections FROM chunks WHERE id IN ({listed})").fetchall()
            for rowid, text, heading_path, sections in rows:
                db.execute("DELETE FROM chunks_stems WHERE rowid = ?", (rowid,))
                write_stems(db, rowid, text, [_heading_text(heading_path, sections)])
            db.execute("DELETE FROM stems_pending")
            db.execute("DELETE FROM stems_unchecked")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    log.info("wrote the stems of %d chunks stored by an older citebot", len(rows))


def stems_written(db: sqlite3.Connection, rowid: int) -> None:
    """This version's ingest wrote the chunk's stems as it cuts them: nothing left to write."""
    db.execute("DELETE FROM stems_pending WHERE chunk_rowid = ?", (rowid,))
    db.execute("DELETE FROM stems_unchecked WHERE chunk_rowid = ?", (rowid,))


@migration
def m009_chunk_changes(db: sqlite3.Connection) -> None:
    """When a chunk's text last changed, and its text's hash (search.types.text_hash), so a
    turn's citations can be checked against the collection (stale citations). Chunks stored before have no `changed_at` (unknown); their hash is
    computed here from the stored text. (Turns by time use m007's index.)"""
    db.execute("ALTER TABLE chunks ADD COLUMN text_hash TEXT")
    db.execute("ALTER TABLE chunks ADD COLUMN changed_at TEXT")
    db.execute("CREATE INDEX chunks_by_source ON chunks(source)")
    rows = db.execute("SELECT id, text FROM chunks").fetchall()
    db.executemany("UPDATE chunks SET text_hash = ? WHERE id = ?", [(text_hash(t), i) for i, t in rows])


@migration
def m010_slack_installs(db: sqlite3.Connection) -> None:
    """Slack installations when citebot installs in many workspaces (bot/slack/installs.py):
    one row per owner (a workspace, or an organisation for an org-wide install) and field
    (its bot, its latest installer, each installer), and the OAuth states not yet used."""
    _run_script(
        db,
        """
        CREATE TABLE slack_installs (owner TEXT NOT NULL, field TEXT NOT NULL,
                                     data TEXT NOT NULL, PRIMARY KEY (owner, field));
        CREATE TABLE oauth_states (state TEXT PRIMARY KEY, expires_at REAL NOT NULL);
        """,
    )


@migration
def m011_stems_cut_as_unicode61(db: sqlite3.Connection) -> None:
    """Words beyond ASCII are cut as unicode61 cuts them (search/text.py), which may differ
    from how an older citebot cut them for its stems ("новыи" for "новый"): the stems of
    every chunk whose text or headings the two cuts differ on are written again (listed for
    write_pending_stems, which runs next; "café" or a curly quote cut alike, so most English
    chunks are left as they are). chunks_fts is untouched: SQLite always cut it itself."""
    pending = []
    for rowid, text, heading_path, sections in db.execute("SELECT id, text, heading_path, sections FROM chunks"):
        heading = _heading_text(heading_path, sections)
        if any(not t.isascii() and _nfd_words(t) != words(t) for t in (text, heading)):
            pending.append((rowid,))
    db.executemany("INSERT OR IGNORE INTO stems_pending VALUES (?)", pending)


@migration
def m012_marks_inside_words(db: sqlite3.Connection) -> None:
    """The combining marks of scripts that write vowels as marks are word characters
    (search.text.TOKENIZE: "हिन्दी" one word, not "ह" and "द"): chunks_fts and chunks_stems
    are made again with that tokenizer, each filled with its own stored columns (the index's
    text, copied as it is), and the stems of every chunk whose text or headings hold such a
    mark are written again (write_pending_stems, which runs next). A chunk without one is
    cut as before."""
    for table, columns in (("chunks_fts", "text, heading"), ("chunks_stems", "stems, heading")):
        db.execute(f'CREATE VIRTUAL TABLE {table}_m012 USING fts5({columns}, tokenize = "{TOKENIZE}")')
        db.execute(f"INSERT INTO {table}_m012 (rowid, {columns}) SELECT rowid, {columns} FROM {table}")
    # m006's triggers name chunks_stems: set aside while the tables change places, as written.
    triggers = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    for name, _ in triggers:
        db.execute(f"DROP TRIGGER {name}")
    db.execute("DROP TABLE chunks_vocab")
    for table in ("chunks_fts", "chunks_stems"):
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE {table}_m012 RENAME TO {table}")
    db.execute("CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row')")
    for _, sql in triggers:
        db.execute(sql)
    pending = []
    for rowid, text, heading_path, sections in db.execute("SELECT id, text, heading_path, sections FROM chunks"):
        if any(_has_mark(t) for t in (text, _heading_text(heading_path, sections))):
            pending.append((rowid,))
    db.executemany("INSERT OR IGNORE INTO stems_pending VALUES (?)", pending)


@migration
def m013_stems_of_older_writers(db: sqlite3.Connection) -> None:
    """A citebot older than this one writing into the store afterwards (a downgrade) writes
    its chunks' stems as it cuts them ("छ ट ट" for "छुट्टी" before m012, "новыи" before m011)
    and clears stems_pending for them as this version's ingest does. So every chunk
    inserted is also listed in stems_unchecked, which only this version's ingest clears
    (stems_written); the stems of those left are written again when the store is next
    opened (write_pending_stems)."""
    db.execute("CREATE TABLE stems_unchecked (chunk_rowid INTEGER PRIMARY KEY)")
    db.execute(
        "CREATE TRIGGER chunks_stems_unchecked AFTER INSERT ON chunks BEGIN"
        " INSERT OR IGNORE INTO stems_unchecked VALUES (new.id); END"
    )
    db.execute(
        "CREATE TRIGGER chunks_stems_unchecked_delete AFTER DELETE ON chunks BEGIN"
        " DELETE FROM stems_unchecked WHERE chunk_rowid = old.id; END"
    )


# The tables a search reads, whose writes move the content version (the FTS5 tables are
# virtual and take no triggers: every write to them comes with one to chunks or, for stems
# rewritten, a delete from the stems lists; docs/decisions/0064-collection-content-version.md).
CONTENT_TABLES = ("documents", "chunks", "windows")
STEMS_LISTS = ("stems_pending", "stems_unchecked")
BUMP = "UPDATE meta SET value = value + 1 WHERE key = 'content_version'"


@migration
def m014_content_version(db: sqlite3.Connection) -> None:
    """The collection's content version: a counter in `meta` that every write to what a
    search reads moves, whoever writes (an older citebot after a downgrade too), and that a
    turn, feedback or Slack installation leaves as it is. The store keys its caches on it
    rather than on SQLite's data_version, which any commit moves
    (docs/decisions/0064-collection-content-version.md)."""
    db.execute("INSERT OR IGNORE INTO meta VALUES ('content_version', '0')")
    for table in CONTENT_TABLES:
        for event in ("INSERT", "UPDATE", "DELETE"):
            db.execute(
                f"CREATE TRIGGER content_version_{table}_{event.lower()} AFTER {event} ON {table} BEGIN {BUMP}; END"
            )
    for table in STEMS_LISTS:
        db.execute(f"CREATE TRIGGER content_version_{table}_delete AFTER DELETE ON {table} BEGIN {BUMP}; END")


def _has_mark(text: str) -> bool:
    return not text.isascii() and not MARK_SET.isdisjoint(text)


def _nfd_words(text: str) -> list[str]:
    """The cut before m011, kept to find the chunks it differs on: lower case, NFD, every
    combining mark dropped, runs of letters and digits."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    return re.findall(r"[^\W_]+", "".join(c for c in decomposed if not unicodedata.combining(c)))
