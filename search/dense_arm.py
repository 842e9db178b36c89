"""The dense arm, begun beside the rest of a retrieval.

The question's own embedding and its dense read depend on nothing but the question, so
Retriever.retrieve begins them on a worker thread before it analyses the question and runs
the lexical arm, and joins them before fusion. ONNX Runtime, numpy, SQLite and the
Elasticsearch client's socket reads give the GIL up, so on two cores the arms overlap
(docs/decisions/0052-overlapped-arms.md). The glossary's second embedding (the question
with the other names beside its own) needs the analysis: it runs after the join.

What the worker touches, and why that is safe from a second thread: the encoder, which
concurrent Slack turns already call from their own threads (the Embedder takes a lock
around its model call); the store's `dense`, which the embedded store runs under its lock
(every SQLite statement does: search/embedded_connection.py, SerialConnection; `dense`
reads the collection's version there, its scope mask is Python), and which on Elasticsearch is
one request on the client's thread-safe connection pool. (So a caller must not hold the
embedded store's lock while it retrieves: the worker would wait for it, and it for the worker.)

A failure is the caller's, as if the arms ran in sequence: `result()` raises the worker's
exception itself (its type, message and cause), and the caller joins the worker before it
raises its own (Retriever.retrieve keeps the order analysis, dense, lexical).
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass

import numpy as np

from search.glossary import Expansion, with_other_names
from search.scope import Scope
from search.store import Store
from search.types import Chunk

# One pool per process, as many workers as the bot runs turns at once (bot/slack/pool.py
# TURN_WORKERS, which search/ cannot import): a thread's start costs 0.2-0.5 ms here, a pool's
# hand-over 0.03 (docs/decisions/0052-overlapped-arms.md). A turn whose job has not begun by
# the time it needs it runs the job itself, so more turns than workers never wait in a queue.
WORKERS = 4

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="citebot-dense")
        return _pool


def _forget_pool() -> None:
    """A forked child holds the pool's object but none of its threads: it makes its own."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


@dataclass
class PlainDense:
    """The question's vector, the store's nearest chunks to it (and those of them the store
    read along with the ranking), and what each step took."""

    vector: np.ndarray
    ranking: list[tuple[str, float]]
    timings: dict[str, float]
    chunks: dict[str, Chunk]


def plain_dense(
    encode: Callable[[str], np.ndarray], store: Store, question: str, pool: int, scope: Scope | None
) -> PlainDense:
    """The question embedded and the store's `pool` nearest chunks by their best window."""
    t = time.perf_counter()
    vector = encode(question)
    embed_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    chunks: dict[str, Chunk] = {}
    ranking = store.dense(vector, pool, scope=scope, chunks=chunks)
    return PlainDense(vector, ranking, {"embed": embed_ms, "dense": (time.perf_counter() - t) * 1000}, chunks)


class Begun:
    """plain_dense begun on the process's pool, in a copy of the caller's context (its
    log bindings). `result()` joins it; a job the pool has not begun yet is taken back and
    run on the caller's thread."""

    def __init__(
        self, encode: Callable[[str], np.ndarray], store: Store, question: str, pool: int, scope: Scope | None
    ) -> None:
        self._call = lambda: plain_dense(encode, store, question, pool, scope)
        self._future: Future[PlainDense] | None
        try:
            self._future = _executor().submit(contextvars.copy_context().run, self._call)
        except RuntimeError:  # the interpreter is shutting down: no new threads
            self._future = None

    def result(self) -> PlainDense:
        """The worker's PlainDense, or its exception raised here."""
        if self._future is None or self._future.cancel():
            return self._call()
        return self._future.result()

    def settle(self) -> None:
        """Wait for the job to end, its value and error dropped (the caller failed before
        the dense arm would have run); a job not begun yet never runs."""
        if self._future is not None and not self._future.cancel():
            wait_for([self._future])


def with_aliases(
    encode: Callable[[str], np.ndarray],
    store: Store,
    question: str,
    expansions: list[Expansion],
    plain: list[tuple[str, float]],
    pool: int,
    scope: Scope | None,
    chunks: dict[str, Chunk] | None = None,
) -> list[tuple[str, float]]:
    """The arm's ranking with glossary names (those left after the flood rule): the
    question embedded once more with every other name beside its own, each chunk keeping
    its better score of the two (docs/decisions/0032-aliases-in-the-dense-arm.md).
    `chunks` gathers the chunks the store reads along with the ranking (Store.dense)."""
    named = store.dense(encode(with_other_names(question, expansions)), pool, scope=scope, chunks=chunks)
    best = dict(plain)
    for cid, score in named:
        best[cid] = max(score, best.get(cid, score))
    return sorted(best.items(), key=lambda cs: (-cs[1], cs[0]))[:pool]
