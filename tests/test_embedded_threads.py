"""The embedded store under concurrent turns: scoped reads from several threads at once
finish (a Python scope predicate inside SQLite once deadlocked two Slack turns)."""

from __future__ import annotations

import threading

from search.scope import Scope
from search.types import LexicalQuery, WeightedTerms

SCOPE = Scope(("**/engineering/**", "**/company/**"), "channels.CENG")
ROUNDS = 40


def test_scoped_reads_from_many_threads_at_once_all_finish(small_store):
    errors: list[BaseException] = []

    def turn() -> None:
        try:
            for _ in range(ROUNDS):
                small_store.chunk_count(scope=SCOPE)
                small_store.lexical(LexicalQuery((WeightedTerms(("release", "train")),)), 10, scope=SCOPE)
                small_store.phrase_matches(("release", "train"), 3, scope=SCOPE)
                small_store.doc_freqs(["train", "bollard"], scope=SCOPE)
                small_store.chunk_count()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=turn, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [t.is_alive() for t in threads] == [False] * 4, "scoped reads deadlocked"
    assert errors == []
