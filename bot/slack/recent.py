"""Each person's recent turns: the last one, so `/ask why` can explain it without a turn id,
and the few before it, which the Home tab lists (bot.slack.home)."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Protocol

import redis
import structlog

from bot.memory.redis import redis_errors
from search.errors import CitebotError

log = structlog.get_logger("citebot.slack")

# A month (or the turn retention when shorter): "why did it say that?" comes soon after
# the answer, or not at all.
LAST_TURN_TTL_S = 30 * 24 * 3600
IN_PROCESS_USERS = 10_000
# Turn ids kept per person: the Home tab lists the latest few (bot.slack.home.HOME_TURNS).
RECENT_TURNS_KEPT = 10


class RecentTurns(Protocol):
    def remember(self, user: str, turn_id: str) -> None: ...
    def last(self, user: str) -> str | None: ...
    def recent(self, user: str, limit: int) -> list[str]:
        """The person's latest turn ids, newest first (at most `limit`)."""
        ...

    def forget(self, user: str) -> None:
        """Drop what is remembered of the person's turns."""
        ...


class InProcessRecentTurns:
    """For one process: a bounded LRU of user -> their latest turn ids."""

    def __init__(self, max_users: int = IN_PROCESS_USERS, kept: int = RECENT_TURNS_KEPT) -> None:
        self._turns: OrderedDict[str, deque[str]] = OrderedDict()
        self._max = max_users
        self._kept = kept
        self._lock = threading.Lock()

    def remember(self, user: str, turn_id: str) -> None:
        with self._lock:
            turns = self._turns.pop(user, None) or deque(maxlen=self._kept)
            turns.appendleft(turn_id)
            self._turns[user] = turns
            while len(self._turns) > self._max:
                self._turns.popitem(last=False)

    def last(self, user: str) -> str | None:
        with self._lock:
            turns = self._turns.get(user)
            return turns[0] if turns else None

    def recent(self, user: str, limit: int) -> list[str]:
        with self._lock:
            return list(self._turns.get(user) or ())[: max(limit, 0)]

    def forget(self, user: str) -> None:
        with self._lock:
            self._turns.pop(user, None)


class RedisRecentTurns:
    """Shared by every replica, two keys per user with a TTL: `last:U` (the last turn id)
    and `recent:U` (a list of the latest turn ids, newest first, trimmed)."""

    def __init__(
        self, client: redis.Redis, prefix: str = "citebot:", ttl_s: int = LAST_TURN_TTL_S, kept: int = RECENT_TURNS_KEPT
    ) -> None:
        self.client = client
        self.prefix = prefix + "last:"
        self.list_prefix = prefix + "recent:"
        self.ttl_s = ttl_s
        self.kept = kept

    def remember(self, user: str, turn_id: str) -> None:
        key = self.list_prefix + user
        with redis_errors("remember the last turn"):
            pipe = self.client.pipeline()  # MULTI/EXEC: both keys move together
            pipe.set(self.prefix + user, turn_id.encode(), ex=self.ttl_s)
            pipe.lpush(key, turn_id.encode())
            pipe.ltrim(key, 0, self.kept - 1)
            pipe.expire(key, self.ttl_s)
            pipe.execute()

    def recent(self, user: str, limit: int) -> list[str]:
        if limit <= 0:
            return []
        with redis_errors("read the recent turns"):
            raw = self.client.lrange(self.list_prefix + user, 0, limit - 1)
        turns = [t.decode() if isinstance(t, bytes) else str(t) for t in raw]
        if turns:
            return turns
        last = self.last(user)  # remembered before the list existed
        return [last] if last else []

    def forget(self, user: str) -> None:
        with redis_errors("forget the recent turns"):
            self.client.delete(self.prefix + user, self.list_prefix + user)

    def last(self, user: str) -> str | None:
        with redis_errors("read the last turn"):
            raw = self.client.get(self.prefix + user)
        return raw.decode() if isinstance(raw, bytes) else raw


def remember_turn(recent: RecentTurns, user: str | None, turn_id: str) -> None:
    """Note a person's last turn; an unavailable store costs `/ask why` its default only."""
    if not user:
        return
    try:
        recent.remember(user, turn_id)
    except CitebotError as exc:
        log.warning("last_turn_not_remembered", error=str(exc))


def last_turn(recent: RecentTurns, user: str | None) -> str:
    """A person's last turn id, or "" (none, or the store is unavailable)."""
    if not user:
        return ""
    try:
        return recent.last(user) or ""
    except CitebotError as exc:
        log.warning("last_turn_unavailable", error=str(exc))
        return ""
