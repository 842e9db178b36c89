"""What the agent surface remembers: the channel a person (or an agent thread) is viewing,
and which agent threads already have a title. In Redis (every replica sees the same) or in
this process, like the rest of citebot's state.

Keys: `user:U…` for app_context_changed (the person's view), `D…:ts` for a thread's
context (assistant_thread_started / assistant_thread_context_changed), `titled:D…:ts` once a
thread was given its title.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Protocol

import redis

from bot.memory.redis import redis_errors

# A viewed channel is forgotten after eight hours, a working day: Slack sends a new
# app_context_changed whenever the view changes, so an older one only describes a person
# who has since closed Slack (docs/decisions/0041-agent-surface.md).
VIEWING_TTL_S = 8 * 3600
# A thread's title mark lasts as long as a thread's conversation state (a week).
TITLED_TTL_S = 7 * 24 * 3600
IN_PROCESS_KEYS = 10_000


class Viewing(Protocol):
    def viewed(self, key: str) -> str:
        """The channel last seen for this key ("" = none known)."""
        ...

    def note(self, key: str, channel: str) -> None:
        """Remember the channel ("" forgets it)."""
        ...

    def first(self, key: str) -> bool:
        """True the first time it is asked for this key (within TITLED_TTL_S), else False."""
        ...


class InProcessViewing:
    def __init__(
        self, max_keys: int = IN_PROCESS_KEYS, ttl_s: float = VIEWING_TTL_S, titled_ttl_s: float = TITLED_TTL_S
    ) -> None:
        self._keys: OrderedDict[str, tuple[float, str]] = OrderedDict()  # key -> (until, value)
        self._max = max_keys
        self._ttl_s = ttl_s
        self._titled_ttl_s = titled_ttl_s
        self._lock = threading.Lock()

    def _get(self, key: str) -> str | None:
        held = self._keys.get(key)
        if held is None or held[0] <= time.monotonic():
            return None
        return held[1]

    def _set(self, key: str, value: str, ttl_s: float) -> None:
        self._keys.pop(key, None)
        self._keys[key] = (time.monotonic() + ttl_s, value)
        while len(self._keys) > self._max:
            self._keys.popitem(last=False)

    def viewed(self, key: str) -> str:
        with self._lock:
            return self._get(key) or ""

    def note(self, key: str, channel: str) -> None:
        with self._lock:
            if channel:
                self._set(key, channel, self._ttl_s)
            else:
                self._keys.pop(key, None)

    def first(self, key: str) -> bool:
        with self._lock:
            if self._get(key) is not None:
                return False
            self._set(key, "1", self._titled_ttl_s)
            return True


class RedisViewing:
    """`viewing:KEY` strings with a TTL; `first` is SET NX, so one replica titles a thread."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str = "citebot:",
        ttl_s: int = VIEWING_TTL_S,
        titled_ttl_s: int = TITLED_TTL_S,
    ) -> None:
        self.client = client
        self.prefix = prefix + "viewing:"
        self.ttl_s = ttl_s
        self.titled_ttl_s = titled_ttl_s

    def viewed(self, key: str) -> str:
        with redis_errors("read the channel a person is viewing"):
            raw = self.client.get(self.prefix + key)
        return raw.decode() if isinstance(raw, bytes) else str(raw or "")

    def note(self, key: str, channel: str) -> None:
        with redis_errors("remember the channel a person is viewing"):
            if channel:
                self.client.set(self.prefix + key, channel.encode(), ex=self.ttl_s)
            else:
                self.client.delete(self.prefix + key)

    def first(self, key: str) -> bool:
        with redis_errors("mark a thread as titled"):
            return bool(self.client.set(self.prefix + key, b"1", nx=True, ex=self.titled_ttl_s))
