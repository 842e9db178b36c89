"""What thread recall remembers between reads, so it stays within Slack's limits: when
conversations.replies may be called again after a 429, and which threads it has read and
found to hold no answer of citebot's. In Redis (every replica backs off together) or in
this process."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Protocol

import redis

from bot.memory.redis import redis_errors

# A thread read and found to hold no answer of citebot's is not read again for an hour:
# every human reply in such a thread would otherwise spend the minute's one read
# (docs/data.md).
FOREIGN_THREAD_TTL_S = 3600
IN_PROCESS_THREADS = 10_000


class RecallMemo(Protocol):
    def wait_s(self) -> float:
        """Seconds until conversations.replies may be called again (0: now)."""
        ...

    def back_off(self, seconds: float) -> None:
        """Slack answered 429: call no more for `seconds`."""
        ...

    def foreign(self, thread_key: str) -> bool:
        """Whether the thread was read lately and held no answer of citebot's."""
        ...

    def mark_foreign(self, thread_key: str) -> None: ...


class InProcessRecallMemo:
    def __init__(self, ttl_s: float = FOREIGN_THREAD_TTL_S, max_threads: int = IN_PROCESS_THREADS) -> None:
        self._until = 0.0
        self._threads: OrderedDict[str, float] = OrderedDict()
        self._ttl_s = ttl_s
        self._max = max_threads
        self._lock = threading.Lock()

    def wait_s(self) -> float:
        return max(0.0, self._until - time.monotonic())

    def back_off(self, seconds: float) -> None:
        with self._lock:
            self._until = max(self._until, time.monotonic() + seconds)

    def foreign(self, thread_key: str) -> bool:
        with self._lock:
            at = self._threads.get(thread_key)
            return at is not None and time.monotonic() - at < self._ttl_s

    def mark_foreign(self, thread_key: str) -> None:
        with self._lock:
            self._threads.pop(thread_key, None)
            self._threads[thread_key] = time.monotonic()
            while len(self._threads) > self._max:
                self._threads.popitem(last=False)


class RedisRecallMemo:
    """`recall:wait` (a key whose TTL is the back-off) and `recall:foreign:KEY` (an hour)."""

    def __init__(self, client: redis.Redis, prefix: str = "citebot:", ttl_s: int = FOREIGN_THREAD_TTL_S) -> None:
        self.client = client
        self.wait_key = prefix + "recall:wait"
        self.foreign_prefix = prefix + "recall:foreign:"
        self.ttl_s = ttl_s

    def wait_s(self) -> float:
        with redis_errors("read the thread-read back-off"):
            ms = int(self.client.pttl(self.wait_key))
        return max(0.0, ms / 1000)

    def back_off(self, seconds: float) -> None:
        with redis_errors("share the thread-read back-off"):
            self.client.set(self.wait_key, b"1", px=max(1, int(seconds * 1000)))

    def foreign(self, thread_key: str) -> bool:
        with redis_errors("read the threads known to be others'"):
            return bool(self.client.exists(self.foreign_prefix + thread_key))

    def mark_foreign(self, thread_key: str) -> None:
        with redis_errors("note a thread as others'"):
            self.client.set(self.foreign_prefix + thread_key, b"1", ex=self.ttl_s)
