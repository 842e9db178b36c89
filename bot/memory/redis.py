"""The one translation point for Redis errors: every Redis call in citebot runs inside
`redis_errors`, which turns redis-py's exceptions into citebot's StoreError with a message
that says what failed and what to check. Callers never catch redis.RedisError themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from bot.metrics import BACKEND_ERRORS
from search.errors import StoreError

# redis-py is imported where a Redis call is made: the embedded default never makes one,
# and importing it (redis.asyncio with it) was 0.08 s of every `citebot ask`.
if TYPE_CHECKING:
    import redis

# Connect and per-command timeouts of citebot's Redis client: a Redis that is down or
# partitioned must fail a call within seconds, never hang a turn worker.
REDIS_TIMEOUT_S = 5


def connect(url: str) -> redis.Redis:
    """A client for REDIS_URL (connects lazily, on the first command)."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)


class RedisUnavailable(StoreError):
    """Redis failed a call (down, unreachable, timed out, refused the command)."""


@contextmanager
def redis_errors(doing: str) -> Iterator[None]:
    """Run Redis calls; a Redis failure becomes RedisUnavailable("cannot <doing> in Redis …")
    and counts as a Redis backend error."""
    import redis

    try:
        yield
    except redis.RedisError as exc:
        BACKEND_ERRORS.labels("redis").inc()
        raise RedisUnavailable(f"cannot {doing} in Redis ({exc}); check REDIS_URL and that Redis is up") from exc
