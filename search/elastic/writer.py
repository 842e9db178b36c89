"""The background bulk writer of an ingest run: the chunk documents go to Elasticsearch
in a thread of their own while the caller embeds the next ones.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

# Bulk requests: 200 chunk documents with their nested vectors are ~1.5 MB; 429s
# (the cluster is busy) are retried with exponential backoff.
BULK_CHUNK_DOCS = 200
# Chunk documents an ingest may hand the background writer ahead of what Elasticsearch
# has taken (the back-pressure; ~7.5 MB of actions at ~1.5 MB per 200).
BULK_QUEUE_DOCS = 1000
BULK_MAX_BYTES = 10 * 1024 * 1024
BULK_MAX_RETRIES = 5
BULK_INITIAL_BACKOFF_S = 1.0
BULK_MAX_BACKOFF_S = 30.0


class _BulkWriter:
    """Writes an ingest's documents in a background thread while the caller embeds the
    next ones: one streaming_bulk over a bounded queue. One thread keeps the order of the
    actions (parallel_bulk sends requests out of order, and a document replaced twice in a
    run must be deleted before it is written again; _drop_written flushes first). The
    queue is the back-pressure: when Elasticsearch is slower than the model, send() waits
    once BULK_QUEUE_DOCS actions are pending. An error stops the writer and is raised by
    the next send() or by finish() (commit), with the message of ElasticStore._calls."""

    _END = object()

    def __init__(self, bulk: Callable[[Iterable[dict[str, Any]], str], int]) -> None:
        self._bulk = bulk  # ElasticStore._bulk
        self._queue: queue.Queue = queue.Queue(maxsize=BULK_QUEUE_DOCS)
        self._error: BaseException | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="citebot-es-bulk", daemon=True)
        self._thread.start()

    def _actions(self) -> Iterator[dict[str, Any]]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            yield item

    def _run(self) -> None:
        try:
            self._bulk(self._actions(), "writing documents to the new index")
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            self._error = exc
        finally:
            self._stopped.set()

    def _put(self, item: object) -> None:
        while not self._stopped.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def send(self, actions: Sequence[dict[str, Any]]) -> None:
        self._raise()
        for action in actions:
            self._put(action)

    def finish(self) -> None:
        self._put(self._END)
        self._thread.join()
        self._raise()

    def abandon(self) -> None:
        """Stop without waiting for the writes (the index is about to be deleted)."""
        self._stopped.set()
        while True:  # unblock the thread: drop what is queued, then end its stream
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        try:
            self._queue.put_nowait(self._END)
        except queue.Full:
            pass
        self._thread.join(timeout=30)
