"""Conversation state: the earlier turns of a thread, in Redis or in this process.

Earlier answers are context for condensing a follow-up, never sources.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

from bot.memory.redis import redis_errors

if TYPE_CHECKING:
    import redis  # imported by bot.memory.redis where a Redis call is made

# A thread remembers this many turns; older ones add little to a follow-up.
HISTORY_TURNS = 6
# Idle threads are forgotten after a week (sooner when the turn retention is shorter).
THREAD_TTL_S = 7 * 24 * 3600
IN_PROCESS_THREADS = 10_000


@dataclass(frozen=True)
class PriorTurn:
    turn_id: str
    question: str
    condensed: str
    answer: str


class ConversationState(Protocol):
    def history(self, thread_key: str) -> list[PriorTurn]: ...
    def append(self, thread_key: str, turn: PriorTurn) -> None: ...
    def forget(self, thread_keys: Iterable[str]) -> int:
        """Drop these threads' earlier turns; how many threads were held."""
        ...


def thread_ttl_s(retention_days: int) -> int:
    """How long an idle thread is kept: a week, or the turn retention when that is shorter."""
    return min(THREAD_TTL_S, retention_days * 24 * 3600)


class InProcessState:
    """For one process: a bounded LRU of threads, each forgotten once idle for `ttl_s`."""

    def __init__(self, max_threads: int = IN_PROCESS_THREADS, ttl_s: int = THREAD_TTL_S) -> None:
        # thread key -> (when its last turn was added, its turns)
        self._threads: OrderedDict[str, tuple[float, list[PriorTurn]]] = OrderedDict()
        self._max = max_threads
        self._ttl_s = ttl_s
        self._lock = threading.Lock()

    def history(self, thread_key: str) -> list[PriorTurn]:
        with self._lock:
            at, turns = self._threads.get(thread_key, (0.0, []))
            if turns and time.time() - at > self._ttl_s:
                del self._threads[thread_key]
                return []
            return list(turns)

    def append(self, thread_key: str, turn: PriorTurn) -> None:
        with self._lock:
            at, turns = self._threads.pop(thread_key, (0.0, []))
            if time.time() - at > self._ttl_s:
                turns = []
            self._threads[thread_key] = (time.time(), (turns + [turn])[-HISTORY_TURNS:])
            while len(self._threads) > self._max:
                self._threads.popitem(last=False)

    def forget(self, thread_keys: Iterable[str]) -> int:
        with self._lock:
            return sum(self._threads.pop(k, None) is not None for k in set(thread_keys))


class RedisState:
    """Shared by every bot replica: a capped list per thread with a TTL."""

    def __init__(self, client: redis.Redis, prefix: str = "citebot:thread:", ttl_s: int = THREAD_TTL_S) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s

    def history(self, thread_key: str) -> list[PriorTurn]:
        with redis_errors("read the thread's earlier turns"):
            raw = self.client.lrange(self.prefix + thread_key, 0, -1)
        return [PriorTurn(**json.loads(r)) for r in raw]

    def append(self, thread_key: str, turn: PriorTurn) -> None:
        key = self.prefix + thread_key
        with redis_errors("remember the turn in its thread"):
            pipe = self.client.pipeline()
            pipe.rpush(key, json.dumps(asdict(turn)))
            pipe.ltrim(key, -HISTORY_TURNS, -1)
            pipe.expire(key, self.ttl_s)
            pipe.execute()

    def forget(self, thread_keys: Iterable[str]) -> int:
        keys = [self.prefix + k for k in set(thread_keys)]
        if not keys:
            return 0
        with redis_errors("forget threads"):
            return int(self.client.delete(*keys))
