"""Worker pools that count work in flight, so a server can drain them on shutdown."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

# Two pools. Listener threads run the light part of every request right after its ack
# (claim, rate limit, placeholder, buttons): mostly waiting on Redis and Slack, so many.
LISTENER_WORKERS = 16
# Turn threads run the heavy part (embedding, search, composing). Concurrent turns once
# failed with "Unable to create tensor" (5 of 200 in benchmarks/ack_latency.py) until the
# embedder took a lock around its tokenizer and model; encoding is now serial anyway
# (torch spreads one encode over every core), so 4 lets turns that wait on Claude or
# Elasticsearch overlap. With the pools apart, a burst still gets its placeholders at once.
TURN_WORKERS = 4


class WorkPool(ThreadPoolExecutor):
    """Bolt's listener executor, counting work in flight so a server can drain it."""

    def __init__(self, workers: int, name: str) -> None:
        super().__init__(max_workers=workers, thread_name_prefix=name)
        self._pending = 0
        self._idle = threading.Condition()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        with self._idle:
            self._pending += 1
        try:
            # in a copy of the submitter's context: the workspace of the request (bot.slack.workspace)
            future = super().submit(contextvars.copy_context().run, fn, *args, **kwargs)
        except BaseException:
            self._finished(None)
            raise
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: Future | None) -> None:
        with self._idle:
            self._pending -= 1
            if self._pending == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """True once no work is queued or running; False if `timeout_s` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout_s)
