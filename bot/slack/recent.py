"""Each person's last turn, so `/ask why` can explain it without a turn id."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

import redis
import structlog

from bot.memory.redis import redis_errors
from search.errors import CitebotError

log = structlog.get_logger("citebot.slack")

# A month: "why did it say that?" comes soon after the answer, or not at all.
LAST_TURN_TTL_S = 30 * 24 * 3600
IN_PROCESS_USERS = 10_000


class RecentTurns(Protocol):
    def remember(self, user: str, turn_id: str) -> None: ...
    def last(self, user: str) -> str | None: ...


class InProcessRecentTurns:
    """For one process: a bounded LRU of user -> last turn id."""

    def __init__(self, max_users: int = IN_PROCESS_USERS) -> None:
        self._last: OrderedDict[str, str] = OrderedDict()
        self._max = max_users
        self._lock = threading.Lock()

    def remember(self, user: str, turn_id: str) -> None:
        with self._lock:
            self._last.pop(user, None)
            self._last[user] = turn_id
            while len(self._last) > self._max:
                self._last.popitem(last=False)

    def last(self, user: str) -> str | None:
        with self._lock:
            return self._last.get(user)


class RedisRecentTurns:
    """Shared by every replica: one key per user with a TTL."""

    def __init__(self, client: redis.Redis, prefix: str = "citebot:",
                 ttl_s: int = LAST_TURN_TTL_S) -> None:
        self.client = client
        self.prefix = prefix + "last:"
        self.ttl_s = ttl_s

    def remember(self, user: str, turn_id: str) -> None:
        with redis_errors("remember the last turn"):
            self.client.set(self.prefix + user, turn_id.encode(), ex=self.ttl_s)

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
