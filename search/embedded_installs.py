"""The embedded store's rows for Slack installations and OAuth states (schema: m010 in
search/embedded_migrations.py). A mixin of EmbeddedStore (search/embedded.py), which owns
the connection and lock; what the rows mean is bot/slack/installs.py's business.
"""

from __future__ import annotations

import sqlite3
import threading


class InstallRows:
    """Keyed text rows: (owner, field) -> data, and one-use states with an expiry."""

    _db: sqlite3.Connection
    _lock: threading.RLock

    def put_install_rows(self, owner: str, rows: dict[str, str]) -> None:
        """Write the fields of one owner in one transaction."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO slack_installs (owner, field, data) VALUES (?, ?, ?)"
                    " ON CONFLICT (owner, field) DO UPDATE SET data = excluded.data",
                    [(owner, f, d) for f, d in rows.items()],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def get_install_row(self, owner: str, field: str) -> str | None:
        row = self._db.execute(
            "SELECT data FROM slack_installs WHERE owner = ? AND field = ?", (owner, field)
        ).fetchone()
        return None if row is None else str(row[0])

    def get_install_rows(self, owner: str, fields: tuple[str, ...]) -> dict[str, str]:
        """Those of the fields the owner has, read at once."""
        marks = ",".join("?" * len(fields))
        return {
            str(f): str(d)
            for f, d in self._db.execute(
                f"SELECT field, data FROM slack_installs WHERE owner = ? AND field IN ({marks})", (owner, *fields)
            ).fetchall()
        }

    def delete_install_rows(self, owner: str, fields: tuple[str, ...] | None = None) -> int:
        """Delete these fields of the owner, or all of its rows when `fields` is None."""
        if fields is None:
            rows = self._db.execute("DELETE FROM slack_installs WHERE owner = ? RETURNING field", (owner,))
        else:
            marks = ",".join("?" * len(fields))
            rows = self._db.execute(
                f"DELETE FROM slack_installs WHERE owner = ? AND field IN ({marks}) RETURNING field", (owner, *fields)
            )
        return len(rows.fetchall())

    def install_fields(self, owner: str) -> list[str]:
        return [
            str(r[0])
            for r in self._db.execute(
                "SELECT field FROM slack_installs WHERE owner = ? ORDER BY field", (owner,)
            ).fetchall()
        ]

    def install_owners(self) -> list[str]:
        return [
            str(r[0]) for r in self._db.execute("SELECT DISTINCT owner FROM slack_installs ORDER BY owner").fetchall()
        ]

    def put_oauth_state(self, state: str, expires_at: float) -> None:
        self._db.execute("INSERT INTO oauth_states (state, expires_at) VALUES (?, ?)", (state, expires_at))

    def take_oauth_state(self, state: str, now: float) -> bool:
        """True once for a state issued and not expired; it is gone afterwards (and so are
        the expired ones)."""
        with self._lock:
            self._db.execute("DELETE FROM oauth_states WHERE expires_at < ?", (now,))
            rows = self._db.execute("DELETE FROM oauth_states WHERE state = ? RETURNING state", (state,))
            return len(rows.fetchall()) == 1
