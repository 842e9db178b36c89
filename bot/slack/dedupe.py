"""Exactly-once replies: the first claim of a key wins, across every bot replica.

Slack redelivers an event whose ack was late or lost (X-Slack-Retry-Num 1-3), and a
direct message that mentions the bot may arrive as two events. Before any work, the
Slack adapter claims the event id and the message; only the winner answers. With Redis
the claim is one `SET key 1 NX EX ttl`, shared by every replica; without Redis it is a
TTL dictionary in this process.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

import redis

from bot.memory.redis import redis_errors

# Slack retries three times, the last about five minutes after the first delivery;
# an hour covers that with a wide margin and keeps the key set small.
DEDUPE_TTL_S = 3600
# In-process claims kept at most; the oldest are dropped first (a day of busy traffic).
IN_PROCESS_CLAIMS = 100_000


class Deduper(Protocol):
    def claim(self, key: str) -> bool:
        """True for the first claim of `key` within the TTL, False for every later one."""
        ...


class InProcessDeduper:
    """For one process: claims expire after the TTL; the dictionary is bounded."""

    def __init__(self, ttl_s: float = DEDUPE_TTL_S, max_keys: int = IN_PROCESS_CLAIMS) -> None:
        self.ttl_s = ttl_s
        self.max_keys = max_keys
        self._expiry: dict[str, float] = {}
        self._lock = threading.Lock()

    def claim(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            expires = self._expiry.get(key)
            if expires is not None and expires > now:
                return False
            self._expiry.pop(key, None)
            self._expiry[key] = now + self.ttl_s
            if len(self._expiry) > self.max_keys:
                self._prune(now)
            return True

    def __len__(self) -> int:
        return len(self._expiry)

    def _prune(self, now: float) -> None:
        for key in [k for k, exp in self._expiry.items() if exp <= now]:
            del self._expiry[key]
        while len(self._expiry) > self.max_keys:  # insertion order: oldest first
            del self._expiry[next(iter(self._expiry))]


class RedisDeduper:
    """Shared by every replica: `SET prefix+key 1 NX EX ttl` is atomic in Redis."""

    def __init__(self, client: redis.Redis, prefix: str = "citebot:", ttl_s: int = DEDUPE_TTL_S) -> None:
        self.client = client
        self.prefix = prefix + "seen:"
        self.ttl_s = ttl_s

    def claim(self, key: str) -> bool:
        with redis_errors(f"claim {key!r}"):
            return bool(self.client.set(self.prefix + key, b"1", nx=True, ex=self.ttl_s))
