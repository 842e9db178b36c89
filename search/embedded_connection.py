"""The embedded store's SQLite connection, shared by threads, and its scope predicate.

SerialConnection runs every statement under the store's lock and reads it to the end (why:
its docstring); in_scope is the Python function SQL calls as citebot_in_scope(source, regex).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from functools import lru_cache


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.DOTALL)


def in_scope(source: str, pattern: str) -> int:
    return int(_regex(pattern).fullmatch(source) is not None)


class _Rows(list):
    """A statement's rows, read to the end: fetchone(), fetchall() and lastrowid as on a cursor."""

    lastrowid: int | None = None

    def fetchone(self):
        return self[0] if self else None

    def fetchall(self) -> list:
        return list(self)


class SerialConnection:
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
