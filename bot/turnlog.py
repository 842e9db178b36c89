"""The turn log in Redis, shared by every replica, and the typed view of a logged turn.

One JSON document per turn (`prefix turn:ID`) and a list of feedback entries beside it
(`prefix feedback:ID`); `get_turn` returns the record with its "feedback" list, the same
shape as the embedded store's turn log, so `citebot turns show` reads either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields

import redis

from bot.turn import TurnRecord
from search.errors import StoreError

# Ninety days: long enough to answer "why did it say that?" after a quarter's review.
TURN_TTL_S = 90 * 24 * 3600


@dataclass(frozen=True)
class Feedback:
    """One click on an answer's feedback buttons."""

    at: str
    user: str | None
    value: str


@dataclass(frozen=True)
class LoggedTurn:
    """A turn as read back from a turn log: the record and the feedback it received."""

    record: TurnRecord
    feedback: tuple[Feedback, ...] = ()

    @classmethod
    def from_log(cls, raw: dict) -> LoggedTurn:
        """Fields this version does not know are ignored, so old and new records both load."""
        known = {f.name for f in fields(TurnRecord)}
        record = TurnRecord(**{k: v for k, v in raw.items() if k in known})
        feedback = tuple(
            Feedback(str(f.get("at", "")), f.get("user"), str(f.get("value", "")))
            for f in raw.get("feedback") or []
        )
        return cls(record, feedback)


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
        try:
            self.client.set(self._turn_key(turn_id), payload.encode("utf-8"), ex=self.ttl_s)
        except redis.RedisError as exc:
            raise StoreError(f"cannot write turn {turn_id} to Redis ({exc}); check REDIS_URL") from exc

    def get_turn(self, turn_id: str) -> dict | None:
        try:
            pipe = self.client.pipeline()
            pipe.get(self._turn_key(turn_id))
            pipe.lrange(self._feedback_key(turn_id), 0, -1)
            raw, feedback = pipe.execute()
        except redis.RedisError as exc:
            raise StoreError(f"cannot read turn {turn_id} from Redis ({exc}); check REDIS_URL") from exc
        if raw is None:
            return None
        record = json.loads(raw)
        record["feedback"] = [json.loads(f) for f in feedback]
        return record

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        entry = json.dumps({"at": at, "user": user, "value": value}, ensure_ascii=False)
        key = self._feedback_key(turn_id)
        try:
            pipe = self.client.pipeline()
            pipe.rpush(key, entry.encode("utf-8"))
            pipe.expire(key, self.ttl_s)
            pipe.execute()
        except redis.RedisError as exc:
            raise StoreError(
                f"cannot record feedback for turn {turn_id} in Redis ({exc}); check REDIS_URL"
            ) from exc
