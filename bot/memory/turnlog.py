"""The turn log: one record per turn, retrievable by turn id, with feedback beside it.

Two implementations share the TurnLog protocol and one contract test suite
(tests/test_memory_contract.py): the embedded store's tables (search.embedded, used
without Redis) and RedisTurnLog here (shared by every replica). In Redis a turn is one
JSON document (`prefix turn:ID`) and its feedback a list beside it (`prefix feedback:ID`);
`get_turn` returns the record with its "feedback" list, the same shape in both, so
`citebot turns show` reads either.

`turns_since` lists the turns created at or after a time, oldest first (the owners' gaps
report, bot/owners/gaps.py). In Redis a sorted set (`prefix turns:by_time`, scored by the
creation time in epoch seconds) indexes the turn ids; put_turn adds to it, trims entries
older than the turns' TTL and gives the index the same TTL, so it never outlives them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from bot.memory.redis import redis_errors

if TYPE_CHECKING:
    import redis  # imported by bot.memory.redis where a Redis call is made

# The default retention (bot.memory.retention.DEFAULT_RETENTION_DAYS); wiring passes the setting.
TURN_TTL_S = 90 * 24 * 3600
# Keys read per round trip while a purge scans the log.
PURGE_BATCH = 500
# Turns read per Redis round trip by turns_since.
SINCE_BATCH = 500


def epoch_of(iso: str) -> float:
    """Seconds since the epoch of an ISO 8601 time (a time without a zone is read as UTC)."""
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(f"not an ISO 8601 time: {iso!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


class TurnLog(Protocol):
    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        """Store (or replace) one turn's record."""

    def get_turn(self, turn_id: str) -> dict | None:
        """The record with a "feedback" list, or None for an unknown turn."""

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        """Record one feedback click on a turn."""

    def purge_turns(
        self, before: str | None, users: Sequence[str], limit: int | None = None, teams: Sequence[str] = ()
    ) -> list[dict]:
        """Delete turns created before `before`, asked by one of `users` or in one of
        `teams` (bot.memory.retention.Purgeable)."""

    def turns_since(self, since_iso: str) -> Iterator[dict]:
        """Every turn created at or after `since_iso`, oldest first, each with its "feedback"."""


class RedisTurnLog:
    """put_turn / get_turn / add_feedback against Redis, with a TTL on every key."""

    def __init__(self, client: redis.Redis, prefix: str = "citebot:", ttl_s: int = TURN_TTL_S) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s

    def _turn_key(self, turn_id: str) -> str:
        return f"{self.prefix}turn:{turn_id}"

    def _feedback_key(self, turn_id: str) -> str:
        return f"{self.prefix}feedback:{turn_id}"

    @property
    def _index_key(self) -> str:
        return f"{self.prefix}turns:by_time"

    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        document = {**record, "turn_id": turn_id, "created_at": created_at}
        document.pop("feedback", None)  # feedback lives beside the record, never inside it
        payload = json.dumps(document, ensure_ascii=False, default=str)
        at = epoch_of(created_at)
        with redis_errors(f"write turn {turn_id}"):
            pipe = self.client.pipeline()
            pipe.set(self._turn_key(turn_id), payload.encode("utf-8"), ex=self.ttl_s)
            pipe.zadd(self._index_key, {turn_id: at})
            # The index keeps the turns' TTL: entries older than it name expired turns.
            pipe.zremrangebyscore(self._index_key, "-inf", f"({at - self.ttl_s}")
            pipe.expire(self._index_key, self.ttl_s)
            pipe.execute()

    def get_turn(self, turn_id: str) -> dict | None:
        with redis_errors(f"read turn {turn_id}"):
            pipe = self.client.pipeline()
            pipe.get(self._turn_key(turn_id))
            pipe.lrange(self._feedback_key(turn_id), 0, -1)
            raw, feedback = pipe.execute()
        if raw is None:
            return None
        record = json.loads(raw)
        record["feedback"] = [json.loads(f) for f in feedback]
        return record

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        entry = json.dumps({"at": at, "user": user, "value": value}, ensure_ascii=False)
        key = self._feedback_key(turn_id)
        with redis_errors(f"record feedback for turn {turn_id}"):
            pipe = self.client.pipeline()
            pipe.rpush(key, entry.encode("utf-8"))
            pipe.expire(key, self.ttl_s)
            pipe.execute()

    def purge_turns(
        self, before: str | None, users: Sequence[str], limit: int | None = None, teams: Sequence[str] = ()
    ) -> list[dict]:
        """Scan the log (Redis keeps no index by time or person) and delete the matching
        turns with their feedback. `limit` does not apply: the keys' TTL does the routine
        expiry, so a purge runs only when someone asks for one."""
        if before is None and not users and not teams:
            return []
        wanted = set(users)
        workspaces = set(teams)
        gone: list[dict] = []
        with redis_errors("purge turns"):
            batch: list[bytes] = []
            for key in self.client.scan_iter(match=self._turn_key("*"), count=PURGE_BATCH):
                batch.append(key)
                if len(batch) >= PURGE_BATCH:
                    gone += self._purge_batch(batch, before, wanted, workspaces)
                    batch = []
            if batch:
                gone += self._purge_batch(batch, before, wanted, workspaces)
        return gone

    def _purge_batch(
        self, keys: list[bytes], before: str | None, users: AbstractSet[str], teams: AbstractSet[str] = frozenset()
    ) -> list[dict]:
        gone: list[dict] = []
        doomed: list[bytes | str] = []
        ids: list[str] = []
        for key, raw in zip(keys, self.client.mget(keys), strict=True):
            if raw is None:
                continue
            record = json.loads(raw)
            old = before is not None and str(record.get("created_at", "")) < before
            if old or record.get("user") in users or record.get("team") in teams:
                gone.append({k: record.get(k) for k in ("user", "channel", "thread")})
                doomed += [key, self._feedback_key(str(record.get("turn_id")))]
                ids.append(str(record.get("turn_id")))
        if doomed:
            self.client.delete(*doomed)
            self.client.zrem(self._index_key, *ids)
        return gone

    def turns_since(self, since_iso: str) -> Iterator[dict]:
        ids = [i.decode() if isinstance(i, bytes) else str(i) for i in self._since_ids(epoch_of(since_iso))]
        for start in range(0, len(ids), SINCE_BATCH):
            batch = ids[start : start + SINCE_BATCH]
            with redis_errors("read the turns since " + since_iso):
                pipe = self.client.pipeline()
                for turn_id in batch:
                    pipe.get(self._turn_key(turn_id))
                    pipe.lrange(self._feedback_key(turn_id), 0, -1)
                replies = pipe.execute()
            gone = []
            for n, turn_id in enumerate(batch):
                raw, feedback = replies[2 * n], replies[2 * n + 1]
                if raw is None:  # expired (a turn's key outlives no index entry by much)
                    gone.append(turn_id)
                    continue
                record = json.loads(raw)
                record["feedback"] = [json.loads(f) for f in feedback]
                yield record
            if gone:
                with redis_errors("trim the turn index"):
                    self.client.zrem(self._index_key, *gone)

    def _since_ids(self, since: float) -> list:
        with redis_errors("list the turns by time"):
            return list(self.client.zrangebyscore(self._index_key, since, "+inf"))
