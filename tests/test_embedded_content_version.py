"""The embedded store's caches (vector matrix, scope masks, lexical postings, spelling index)
are keyed on the collection's content version (m014, search/embedded_migrations.py): a turn,
feedback, Slack installation or statistic written by another connection or process leaves
them as they are, while a document another connection writes is found on the next search;
an older store gets the counter when opened, and what an older citebot writes moves it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

from search import embedded, embedded_migrations
from search.embedded import EmbeddedStore
from search.scope import Scope
from search.types import LexicalQuery, WeightedTerms
from tests.test_store_contract import E4, KITCHEN, SITE, STAMP, fill, ids, make_doc, unit

ZEBRA = make_doc("zoo.md", [(("Zoo",), "The zebra crossing by the quagga pen.", [unit(1, 1, 1, 1)])])
KETTLE = LexicalQuery((WeightedTerms(("kettle",)),))
QUAGGA = LexicalQuery((WeightedTerms(("quagga",)),))


def _data_version(store: EmbeddedStore) -> int:
    return int(store._db.execute("PRAGMA data_version").fetchone()[0])


def _counter(store: EmbeddedStore) -> int:
    return int(store._db.execute("SELECT value FROM meta WHERE key = 'content_version'").fetchone()[0])


def _warm(store: EmbeddedStore) -> tuple:
    """Every cache filled: the matrix, a scope mask, the postings, a spelling index."""
    store.dense(E4, 3, scope=Scope(("site/**",)))
    store.build_postings()
    assert store._postings() is store._keeper.built is not None
    store.spelling_candidates(["kettel"])
    return store._matrix[1], dict(store._masks), store._keeper.built, dict(store._vocab_cache)  # type: ignore[index]


def _kept(store: EmbeddedStore, matrix, masks, postings, vocab) -> None:
    assert ids(store.dense(E4, 3, scope=Scope(("site/**",))))[0] == SITE[1][3].chunk_id
    assert store._matrix[1] is matrix  # type: ignore[index]
    assert store._masks == masks and all(store._masks[k] is v for k, v in masks.items())
    assert store._postings() is postings
    assert ids(store.lexical(KETTLE, 3))[0] == KITCHEN[1][0].chunk_id
    store.spelling_candidates(["kettel"])
    assert store._vocab_cache.keys() == vocab.keys() and all(store._vocab_cache[k] is v for k, v in vocab.items())


def test_turns_feedback_installs_and_statistics_from_another_connection_keep_the_caches(tmp_path):
    server = EmbeddedStore(tmp_path / "store")
    fill(server, [KITCHEN, SITE])
    warm = _warm(server)
    before, counter = _data_version(server), _counter(server)

    other = EmbeddedStore(tmp_path / "store")  # a `citebot chat` beside the server
    other.put_turn("t1", "2026-01-01T00:00:00+00:00", {"question": "where is the kettle?"})
    other.add_feedback("t1", "2026-01-01T00:00:01+00:00", "U1", "up")
    other.put_install_rows("T1", {"bot": "{}"})
    other.put_oauth_state("s1", 1e12)
    other.write_stat("gate", {"n": 1})
    other.purge_turns("2027-01-01", [])
    other.close()

    assert _data_version(server) != before  # SQLite saw commits by another connection
    assert _counter(server) == counter  # none of them to the collection
    _kept(server, *warm)
    server.close()


def test_a_turn_written_by_another_process_keeps_the_caches(tmp_path):
    server = EmbeddedStore(tmp_path / "store")
    fill(server, [KITCHEN, SITE])
    warm = _warm(server)
    before = _data_version(server)
    script = textwrap.dedent(f"""
        from search.embedded import EmbeddedStore
        s = EmbeddedStore({str(tmp_path / "store")!r})
        s.put_turn("t2", "2026-01-01T00:00:00+00:00", {{"question": "q"}})
        s.close()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert _data_version(server) != before
    _kept(server, *warm)
    assert server.get_turn("t2") is not None
    server.close()


def test_a_document_another_connection_writes_is_found_on_the_next_search(tmp_path):
    server = EmbeddedStore(tmp_path / "store")
    fill(server, [KITCHEN, SITE])
    matrix, _, postings, _ = _warm(server)

    other = EmbeddedStore(tmp_path / "store")  # an ingest beside the server
    other.replace_document(*ZEBRA)
    other.close()

    zebra = ZEBRA[1][0].chunk_id
    assert ids(server.dense(unit(1, 1, 1, 1), 1)) == [zebra]
    assert server._matrix[1] is not matrix  # type: ignore[index]
    assert ids(server.dense(unit(1, 1, 1, 1), 1, scope=Scope(("site/**",)))) != [zebra]
    assert ids(server.lexical(QUAGGA, 3)) == [zebra]  # FTS5 answers while the new version settles
    assert server._postings() is None and server._keeper.built is postings
    assert "quagga" in server.spelling_candidates(["quaga"])["quaga"]
    server.close()


def test_what_an_older_citebot_writes_moves_the_version(tmp_path):
    """After a downgrade an older citebot writes the tables itself (no counter in its code):
    the triggers move it, and a server of this version sees the change."""
    server = EmbeddedStore(tmp_path / "store")
    fill(server, [KITCHEN, SITE])
    matrix, _, _, _ = _warm(server)
    counter = _counter(server)
    older = sqlite3.connect(tmp_path / "store" / embedded.DB_NAME, isolation_level=None)
    rowid = older.execute("SELECT id FROM chunks WHERE chunk_id = ?", (SITE[1][3].chunk_id,)).fetchone()[0]
    older.execute("BEGIN")
    older.execute("DELETE FROM chunks_fts WHERE rowid = ?", (rowid,))
    older.execute("DELETE FROM windows WHERE chunk_rowid = ?", (rowid,))
    older.execute("DELETE FROM chunks WHERE id = ?", (rowid,))
    older.execute("COMMIT")
    older.close()

    assert _counter(server) > counter
    assert SITE[1][3].chunk_id not in ids(server.dense(E4, 10))
    assert server._matrix[1] is not matrix  # type: ignore[index]
    server.close()


def test_an_older_store_gets_the_counter_and_its_triggers_when_opened(tmp_path, monkeypatch):
    before = [(n, step) for n, step in embedded_migrations._MIGRATIONS if n < "m014"]
    assert before[-1][0] == "m013_stems_of_older_writers"
    with monkeypatch.context() as m:  # the store as the citebot before the counter wrote it
        m.setattr(embedded_migrations, "_MIGRATIONS", before)
        older = EmbeddedStore(tmp_path / "old")
        fill(older, [KITCHEN])
        older.close()
    path = tmp_path / "old"

    store = EmbeddedStore(path)
    assert "m014_content_version" in {r[0] for r in store._db.execute("SELECT name FROM _migrations")}
    triggers = {r[0] for r in store._db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {f"content_version_{t}_{e}" for t in ("documents", "chunks", "windows")
            for e in ("insert", "update", "delete")} <= triggers
    assert ids(store.lexical(KETTLE, 3))[0] == KITCHEN[1][0].chunk_id
    counter = _counter(store)
    store.replace_document(*ZEBRA)
    assert _counter(store) > counter
    assert ids(store.dense(unit(1, 1, 1, 1), 1)) == [ZEBRA[1][0].chunk_id]
    store.close()


def test_without_the_counter_every_commit_counts_as_before(tmp_path):
    server = EmbeddedStore(tmp_path / "store")
    fill(server, [KITCHEN, SITE])
    other = sqlite3.connect(tmp_path / "store" / embedded.DB_NAME, isolation_level=None)
    other.execute("DELETE FROM meta WHERE key = 'content_version'")  # by hand
    matrix, _, _, _ = _warm(server)
    other.execute("INSERT INTO turns VALUES ('t3', '2026-01-01', ?)", (json.dumps({}),))
    other.close()
    server.dense(E4, 3)
    assert server._matrix[1] is not matrix  # type: ignore[index]
    server.close()


def test_a_counter_rewritten_by_hand_counts_every_commit_and_says_so_once(tmp_path, caplog):
    server = EmbeddedStore(tmp_path / "store")
    fill(server, [KITCHEN, SITE])
    other = sqlite3.connect(tmp_path / "store" / embedded.DB_NAME, isolation_level=None)
    other.execute("UPDATE meta SET value = '1e3' WHERE key = 'content_version'")  # by hand
    with caplog.at_level("WARNING", logger="citebot.search"):
        matrix, _, _, _ = _warm(server)
        other.execute("INSERT INTO turns VALUES ('t4', '2026-01-01', ?)", (json.dumps({}),))
        assert ids(server.dense(E4, 3))  # searches go on
        assert server._matrix[1] is not matrix  # type: ignore[index]
    other.close()
    warnings = [r.getMessage() for r in caplog.records if "not a counter" in r.getMessage()]
    assert len(warnings) == 1 and "'1e3'" in warnings[0]
    server.close()


class _Interleaved(EmbeddedStore):
    """A server whose next matrix or vocabulary read has another connection commit a write
    between its version's read and its rows' (the stamp is read in between; the vocabulary
    is what the spelling index reads)."""

    write = None

    def _interleave(self) -> None:
        if self.write is not None:
            write, self.write = self.write, None
            write()

    def stamp(self):
        self._interleave()
        return super().stamp()

    def vocabulary(self, *, scope=None):
        self._interleave()
        return super().vocabulary(scope=scope)


def test_a_write_committed_between_the_versions_read_and_the_rows_is_seen_on_the_next_read(tmp_path):
    """The rows read after the version may be newer than it, never older: such a cache is
    read again at the next read (data_version moved), never kept under the newer version."""
    server = _Interleaved(tmp_path / "store")
    fill(server, [KITCHEN, SITE])
    server.dense(E4, 3)
    server.spelling_candidates(["quaga"])
    other = EmbeddedStore(tmp_path / "store")
    zebra = ZEBRA[1][0].chunk_id

    server.write = lambda: other.replace_document(*ZEBRA)
    server._matrix = None  # the next read loads it, and the write lands inside that load
    server.dense(E4, 3)
    assert server.write is None and server._matrix[0] < _counter(server)  # type: ignore[index]
    assert ids(server.dense(unit(1, 1, 1, 1), 1)) == [zebra]
    assert server._matrix[0] == _counter(server)  # type: ignore[index]

    server.write = lambda: other.delete_documents([ZEBRA[0].source])
    server._vocab_cache.clear()
    server.spelling_candidates(["quaga"])
    assert server.write is None
    assert "quagga" not in server.spelling_candidates(["quaga"])["quaga"]
    assert max(server._vocab_cache)[0] == _counter(server)
    assert ids(server.dense(unit(1, 1, 1, 1), 1)) != [zebra]
    other.close()
    server.close()


def test_without_the_counter_a_build_called_at_once_is_not_kept_over_this_stores_write(tmp_path):
    """A build that read the collection before this store wrote is of the version before
    that write; without the counter the write leaves data_version as it is, so only the
    keeper's count of this store's writes tells them apart: the count is the one the read
    saw, not the one after it."""

    class WritesAfterTheRead(EmbeddedStore):
        def _read_for_postings(self):
            read = super()._read_for_postings()
            self.replace_document(*ZEBRA)  # this store's write, between the read and the install
            return read

    path = tmp_path / "store"
    first = EmbeddedStore(path)
    fill(first, [KITCHEN, SITE])
    first.close()
    by_hand = sqlite3.connect(path / embedded.DB_NAME, isolation_level=None)
    by_hand.execute("DELETE FROM meta WHERE key = 'content_version'")
    by_hand.close()
    store = WritesAfterTheRead(path)
    store.build_postings()
    assert store._postings() is None  # what was built lacks the zebra: FTS5 answers
    assert ids(store.lexical(QUAGGA, 3)) == [ZEBRA[1][0].chunk_id]
    store.close()
