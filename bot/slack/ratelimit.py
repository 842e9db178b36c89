"""A per-user rate limit on questions, in Redis (shared by replicas) or in this process.

A person who asks faster than the limit gets a friendly note with the wait, not silence.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import redis

from bot.memory.redis import redis_errors

WINDOW_S = 60


@dataclass(frozen=True)
class RateDecision:
    """Whether a question may run now; if not, how long until it may."""

    allowed: bool
    limit_per_minute: int
    retry_after_s: int = 0


class RateLimiter(Protocol):
    def check(self, user: str) -> RateDecision: ...


class InProcessRateLimiter:
    """A sliding window of the last minute's questions per user."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def check(self, user: str) -> RateDecision:
        now = time.monotonic()
        with self._lock:
            times = self._seen.setdefault(user, deque())
            while times and times[0] <= now - WINDOW_S:
                times.popleft()
            if len(times) >= self.per_minute:
                wait = math.ceil(times[0] + WINDOW_S - now)
                return RateDecision(False, self.per_minute, max(wait, 1))
            times.append(now)
            if len(self._seen) > 10_000:  # forget idle users
                for idle in [u for u, t in self._seen.items() if not t or t[-1] <= now - WINDOW_S]:
                    del self._seen[idle]
            return RateDecision(True, self.per_minute)


class RedisRateLimiter:
    """A fixed one-minute window per user: `INCR` then `EXPIRE`, shared by every replica."""

    def __init__(self, client: redis.Redis, per_minute: int, prefix: str = "citebot:") -> None:
        self.client = client
        self.per_minute = per_minute
        self.prefix = prefix + "rate:"

    def check(self, user: str) -> RateDecision:
        now = time.time()
        window = int(now // WINDOW_S)
        key = f"{self.prefix}{user}:{window}"
        with redis_errors("count questions"):
            pipe = self.client.pipeline()
            pipe.incr(key)
            pipe.expire(key, WINDOW_S * 2)
            count = int(pipe.execute()[0])
        if count > self.per_minute:
            return RateDecision(False, self.per_minute, max(math.ceil((window + 1) * WINDOW_S - now), 1))
        return RateDecision(True, self.per_minute)
