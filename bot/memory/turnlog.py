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
from typing import Protocol

import redis

from bot.memory.redis import redis_errors

# Ninety days: long enough to answer "why did it say that?" after a quarter's review.
TURN_TTL_S = 90 * 24 * 3600


class TurnLog(Protocol):
    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        """Store (or replace) one turn's record."""

    def get_turn(self, turn_id: str) -> dict | None:
        """The record with a "feedback" list, or None for an unknown turn."""

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        """Record one feedback click on a turn."""


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
