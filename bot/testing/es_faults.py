"""Elasticsearch killed in the middle of an ingest, and stopped during a turn: the scenarios
that tests/test_faults_elastic.py asserts on and benchmarks/faults.py measures.

Kill points of an ingest (KILL_POINTS): the proxy (bot/testing/es_proxy.py) SIGKILLs the
private node (bot/testing/services.py) when the ingest sends that request, the node is
started again on the same data folder, and the alias is read: it must serve the old
collection whole (or, once the alias has moved, the new one), no chunk twice; the next
ingest must then bring it to exactly the reference collection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot.testing.embedder import HashingEmbedder
from bot.testing.es_proxy import ElasticProxy, ProxiedRequest
from bot.testing.services import PrivateElasticsearch
from bot.testing.store_audit import collection, copy_folder, duplicated_chunks, edit_collection
from ingest.pipeline import ingest
from search import calibration
from search.elastic import ElasticStore, connect
from search.embedded import EmbeddedStore
from search.errors import CitebotError


def _bulk(r: ProxiedRequest) -> bool:
    return r.method in ("POST", "PUT") and r.path.split("?")[0].endswith("/_bulk")


# point -> (the request that kills the node, which one of them, what the alias must serve after)
KILL_POINTS: dict[str, tuple[Callable[[ProxiedRequest], bool], int, str]] = {
    "first-document-write": (_bulk, 1, "old"),
    "third-document-write": (_bulk, 3, "old"),
    "copying-unchanged-documents": (lambda r: r.method == "POST" and r.path.split("?")[0].endswith("/_pit"), 2, "old"),
    "completing-the-new-index": (lambda r: r.path.split("?")[0].endswith("/_refresh"), 1, "old"),
    "moving-the-alias": (lambda r: r.method == "POST" and r.path.startswith("/_aliases"), 1, "old"),
    "deleting-the-old-index": (lambda r: r.method == "DELETE" and not r.path.startswith("/_pit"), 1, "new"),
    "recalibrating": (
        lambda r: r.method in ("PUT", "POST") and "/_mapping" in r.path and b'"stats"' in r.body,
        1,
        "new",
    ),
}


@dataclass
class KillResult:
    point: str
    ingest_error: str  # what the interrupted ingest said
    served_after_restart: str  # "old", "new", or what else it held
    duplicated: int
    completed: bool  # the next ingest brought the alias to the reference collection
    calibrated: bool
    leftover_indices: list[str] = field(default_factory=list)
    restart_s: float = 0.0
    killed_at: str = ""


def _store(url: str, alias: str) -> ElasticStore:
    return ElasticStore(connect(url, timeout_s=30), alias=alias)


def _served(held: dict, old: dict, new: dict) -> str:
    if held == old:
        return "old"
    if held == new:
        return "new"
    return f"neither ({len(held)} sources)"


def kill_during_ingest(
    es: PrivateElasticsearch, proxy: ElasticProxy, handbook: Path, work: Path, point: str, alias: str
) -> KillResult:
    """One kill point, from a fresh alias: old collection, edited folder, killed ingest,
    restart, the alias read, the next ingest."""
    match, nth, _expected = KILL_POINTS[point]
    embedder = HashingEmbedder()
    folder = copy_folder(handbook, work / "docs")
    first = _store(proxy.url, alias)
    ingest([folder], first, embedder, progress=False)
    old = collection(first)
    first.close()
    edit_collection(folder, seed=3, changed=8)
    reference = EmbeddedStore(work / "reference")
    ingest([folder], reference, embedder, progress=False)
    new = collection(reference)
    reference.close()

    proxy.arm(match, es.kill, nth)
    interrupted = _store(proxy.url, alias)
    error = ""
    try:
        ingest([folder], interrupted, embedder, progress=False)
    except CitebotError as exc:
        error = str(exc)
    try:
        interrupted.close()
    except CitebotError:
        pass  # abandoning the build index needs the node that just died
    proxy.disarm()
    killed_at = proxy.fired[-1].method + " " + proxy.fired[-1].path.split("?")[0] if proxy.fired else ""
    started = time.perf_counter()
    if es.pid is None:
        es.start()
    restart_s = time.perf_counter() - started

    reader = _store(es.url, alias)
    held = collection(reader)
    result = KillResult(
        point,
        error,
        _served(held, old, new),
        len(duplicated_chunks(reader)),
        completed=False,
        calibrated=False,
        restart_s=round(restart_s, 1),
        killed_at=killed_at,
    )
    reader.close()
    again = _store(es.url, alias)
    ingest([folder], again, embedder, progress=False)
    result.completed = collection(again) == new and not duplicated_chunks(again)
    result.calibrated = calibration.stored(again) is not None
    serving = again._current_index()
    result.leftover_indices = sorted(n for n in again.es.indices.get(index=f"{alias}-v*").body if n != serving)
    again.close()
    return result


def delete_alias_indices(url: str, alias: str) -> None:
    store = _store(url, alias)
    try:
        names = list(store.es.indices.get(index=f"{alias}-v*", allow_no_indices=True).body)
        if names:  # by name: the node refuses wildcard deletes
            store.es.indices.delete(index=",".join(names), ignore_unavailable=True)
    finally:
        store.es.close()
