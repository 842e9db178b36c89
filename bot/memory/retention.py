"""How long citebot keeps what people asked: one retention for the turn log and the thread
state, and the purge that removes turns before a date or of named people.

Both turn logs apply it: Redis by a TTL on every key, the embedded store by deleting a
few expired turns at each write (so a quiet deployment never holds turns past their
time for long) and by `citebot turns purge`. What is kept where: docs/data.md.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.memory.state import ConversationState
    from bot.memory.turnlog import TurnLog

# Ninety days: long enough to answer "why did it say that?" after a quarter's review
# (docs/decisions/0027-retention.md).
DEFAULT_RETENTION_DAYS = 90
# Expired turns the embedded log deletes at each write: a write stays one small
# transaction, and a log that a burst of turns outran catches up within a few writes
# (docs/decisions/0027-retention.md).
EXPIRED_PER_WRITE = 50


@dataclass(frozen=True)
class Purged:
    """What one purge removed."""

    turns: int
    threads: int

    def as_dict(self) -> dict[str, int]:
        return {"turns": self.turns, "threads": self.threads}


class Purgeable(Protocol):
    def purge_turns(
        self, before: str | None, users: Sequence[str], limit: int | None = None, teams: Sequence[str] = ()
    ) -> list[dict]:
        """Delete the turns created before `before` (an ISO 8601 time), asked by one of
        `users` or in one of `teams` (any condition; none deletes nothing), at most `limit` of
        them, with their feedback; return the deleted records' user, channel and thread."""


def iso(moment: dt.datetime) -> str:
    """The form turn records keep their created_at in (UTC ISO 8601, as bot.answer.turn
    writes it), so the two compare as strings in time order."""
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def cutoff(days: int, now: dt.datetime | None = None) -> str:
    """The created_at before which a turn has outlived `days` of retention."""
    moment = now or dt.datetime.now(dt.UTC)
    return iso(moment - dt.timedelta(days=days))


def parse_before(value: str) -> str:
    """A --before argument (a date or an ISO 8601 time, UTC unless it says otherwise) as
    a created_at to compare with; ValueError names the forms it takes."""
    text = value.strip()
    try:
        if len(text) == 10:
            moment = dt.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(text)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
    except ValueError:
        raise ValueError(f"{value!r} is not a date: write 2026-01-31 or 2026-01-31T09:00:00Z") from None
    return iso(moment)


def thread_keys(records: Sequence[dict]) -> set[str]:
    """The conversation-state keys of the threads the purged turns were asked in."""
    return {str(r["thread"]) for r in records if r.get("thread")}


class RemembersPeople(Protocol):
    def forget(self, user: str) -> None: ...


def purge(
    turnlog: TurnLog,
    state: ConversationState,
    before: str | None,
    users: Sequence[str],
    recent: RemembersPeople | None = None,
    teams: Sequence[str] = (),
) -> Purged:
    """Remove the turns before `before`, of `users` or in `teams`, the threads they were
    asked in, and, for named people, what is remembered of their last turns."""
    gone = turnlog.purge_turns(before, users, teams=teams)
    threads = state.forget(thread_keys(gone))
    if recent is not None:
        for user in users:
            recent.forget(user)
    return Purged(turns=len(gone), threads=threads)


class ExpiringTurnLog:
    """A turn log without TTLs (the embedded store's) that deletes a few turns past their
    retention at each write, so nothing is kept long past it without a purge being run."""

    def __init__(self, inner: TurnLog, retention_days: int) -> None:
        self.inner = inner
        self.retention_days = retention_days

    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        self.inner.put_turn(turn_id, created_at, record)
        self.inner.purge_turns(cutoff(self.retention_days), (), limit=EXPIRED_PER_WRITE)

    def get_turn(self, turn_id: str) -> dict | None:
        record = self.inner.get_turn(turn_id)
        created = record.get("created_at") if record is not None else None
        if created and str(created) < cutoff(self.retention_days):
            return None  # past retention, not yet deleted: as good as gone
        return record

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        self.inner.add_feedback(turn_id, at, user, value)

    def turns_since(self, since_iso: str) -> Iterator[dict]:
        """The turns since then that are still within retention."""
        return self.inner.turns_since(max(since_iso, cutoff(self.retention_days)))

    def purge_turns(
        self, before: str | None, users: Sequence[str], limit: int | None = None, teams: Sequence[str] = ()
    ) -> list[dict]:
        return self.inner.purge_turns(before, users, limit, teams)
