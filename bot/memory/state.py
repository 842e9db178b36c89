"""Conversation state: the earlier turns of a thread, in Redis or in this process.

Earlier answers are context for condensing a follow-up, never sources.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Protocol

import redis

from bot.memory.redis import redis_errors

# A thread remembers this many turns; older ones add little to a follow-up.
HISTORY_TURNS = 6
# Idle threads are forgotten after a week in Redis.
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


class InProcessState:
    """For one process: a bounded LRU of threads."""

    def __init__(self, max_threads: int = IN_PROCESS_THREADS) -> None:
        self._threads: OrderedDict[str, list[PriorTurn]] = OrderedDict()
        self._max = max_threads
        self._lock = threading.Lock()

    def history(self, thread_key: str) -> list[PriorTurn]:
        with self._lock:
            return list(self._threads.get(thread_key, []))

    def append(self, thread_key: str, turn: PriorTurn) -> None:
        with self._lock:
            turns = self._threads.pop(thread_key, [])
            turns = (turns + [turn])[-HISTORY_TURNS:]
            self._threads[thread_key] = turns
            while len(self._threads) > self._max:
                self._threads.popitem(last=False)


class RedisState:
    """Shared by every bot replica: a capped list per thread with a TTL."""

    def __init__(self, client: redis.Redis, prefix: str = "citebot:thread:") -> None:
        self.client = client
        self.prefix = prefix

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
            pipe.expire(key, THREAD_TTL_S)
            pipe.execute()
