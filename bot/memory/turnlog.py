"""The turn log: one record per turn, retrievable by turn id, with feedback beside it.

Two implementations share the TurnLog protocol and one contract test suite
(tests/test_memory_contract.py): the embedded store's tables (search.embedded, used
without Redis) and RedisTurnLog here (shared by every replica). In Redis a turn is one
JSON document (`prefix turn:ID`) and its feedback a list beside it (`prefix feedback:ID`);
`get_turn` returns the record with its "feedback" list, the same shape in both, so
`citebot turns show` reads either.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

import redis

from bot.memory.redis import redis_errors

# The default retention (bot.memory.retention.DEFAULT_RETENTION_DAYS); wiring passes the setting.
TURN_TTL_S = 90 * 24 * 3600
# Keys read per round trip while a purge scans the log.
PURGE_BATCH = 500


class TurnLog(Protocol):
    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        """Store (or replace) one turn's record."""

    def get_turn(self, turn_id: str) -> dict | None:
        """The record with a "feedback" list, or None for an unknown turn."""

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        """Record one feedback click on a turn."""

    def purge_turns(self, before: str | None, users: Sequence[str], limit: int | None = None
                    ) -> list[dict]:
        """Delete turns created before `before` or asked by one of `users`
        (bot.memory.retention.Purgeable)."""


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

    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        document = {**record, "turn_id": turn_id, "created_at": created_at}
        document.pop("feedback", None)  # feedback lives beside the record, never inside it
        payload = json.dumps(document, ensure_ascii=False, default=str)
        with redis_errors(f"write turn {turn_id}"):
            self.client.set(self._turn_key(turn_id), payload.encode("utf-8"), ex=self.ttl_s)

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

    def purge_turns(self, before: str | None, users: Sequence[str], limit: int | None = None
                    ) -> list[dict]:
        """Scan the log (Redis keeps no index by time or person) and delete the matching
        turns with their feedback. `limit` does not apply: the keys' TTL does the routine
        expiry, so a purge runs only when someone asks for one."""
        if before is None and not users:
            return []
        wanted = set(users)
        gone: list[dict] = []
        with redis_errors("purge turns"):
            batch: list[bytes] = []
            for key in self.client.scan_iter(match=self._turn_key("*"), count=PURGE_BATCH):
                batch.append(key)
                if len(batch) >= PURGE_BATCH:
                    gone += self._purge_batch(batch, before, wanted)
                    batch = []
            if batch:
                gone += self._purge_batch(batch, before, wanted)
        return gone

    def _purge_batch(self, keys: list[bytes], before: str | None, users: set[str]) -> list[dict]:
        gone: list[dict] = []
        doomed: list[bytes | str] = []
        for key, raw in zip(keys, self.client.mget(keys), strict=True):
            if raw is None:
                continue
            record = json.loads(raw)
            old = before is not None and str(record.get("created_at", "")) < before
            if old or record.get("user") in users:
                gone.append({k: record.get(k) for k in ("user", "channel", "thread")})
                doomed += [key, self._feedback_key(str(record.get("turn_id")))]
        if doomed:
            self.client.delete(*doomed)
        return gone
