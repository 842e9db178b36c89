"""Ingest throughput beside the raw encode rate of the same windows, measured in one run.

    .venv/bin/python -m benchmarks.ingest_throughput [PATH] [--backend embedded|elasticsearch] [--json]

PATH (default examples/handbook) is ingested end to end into a fresh store (find, read,
parse, chunk, cut windows, embed, write, commit, calibrate the gate): `ingest_windows_per_s`
is the windows the store then holds over the ingest's wall seconds. The raw rate is the
model alone on exactly those windows: the collection is chunked and cut into windows
beforehand as ingest cuts it (the same token ids; the counts are checked against the
store) and encoded with Embedder.encode_ids, once before and once after the ingest;
`raw_windows_per_s` is their mean, so drift from other load on the machine falls on both
sides. `ratio` = ingest / raw; `cpu_ratio` the same with this process's CPU seconds,
steadier than the wall clock when the machine is shared. Also printed: the raw rate with one batch per document (how
ingest ran before pooled batches, docs/decisions/0020-ingest-batches.md), where the
ingest's seconds went (IngestSummary.stages), and
the load average before and after.

With --backend elasticsearch the store is a fresh alias on CITEBOT_BENCH_ES_URL or
CITEBOT_TEST_ES_URL (`eval "$(scripts/services start)"`), deleted afterwards.

--json prints one object: {"path","backend","windows","chunks","raw_windows_per_s",
"ingest_windows_per_s","ratio", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import REPO
from ingest.chunker import chunk_document, doc_id_for
from ingest.embedder import Embedder
from ingest.pipeline import ingest, load_collection
from search.embedded import DB_NAME, EmbeddedStore


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def raw_encode(embedder: Embedder, jobs) -> tuple[float, float]:
    """Wall and CPU seconds the model takes for these windows alone, in length-sorted batches."""
    started, cpu = time.perf_counter(), time.process_time()
    embedder.encode_ids([j.ids for j in jobs])
    return time.perf_counter() - started, time.process_time() - cpu


def per_document(embedder: Embedder, chunks, jobs) -> float:
    """Seconds with one model call per document (the ingest before pooling)."""
    doc_of = {c.chunk_id: c.doc_id for c in chunks}
    by_doc: dict[str, list] = {}
    for j in jobs:
        by_doc.setdefault(doc_of[j.chunk_id], []).append(j)
    started = time.perf_counter()
    for group in by_doc.values():
        embedder.encode_ids([j.ids for j in group])
    return time.perf_counter() - started


def stored_windows(store) -> int:
    if isinstance(store, EmbeddedStore):
        db = sqlite3.connect(store.directory / DB_NAME)
        try:
            return int(db.execute("SELECT count(*) FROM windows").fetchone()[0])
        finally:
            db.close()
    res = store.es.search(index=store.alias, size=0, query={"term": {"kind": "chunk"}},
                          aggs={"w": {"nested": {"path": "windows"}}})
    return int(res["aggregations"]["w"]["doc_count"])


def open_store(backend: str, tmp: Path):
    if backend == "embedded":
        return EmbeddedStore(tmp / "store")
    from benchmarks import corpus
    from search.elastic import ElasticStore, connect

    return ElasticStore(connect(corpus.elastic_url(), timeout_s=120),
                        alias=f"citebot-bench-ingest-{uuid.uuid4().hex[:8]}")


def drop(store) -> None:
    if isinstance(store, EmbeddedStore):
        return
    for name in store.es.indices.get(index=f"{store.alias}-v*", allow_no_indices=True):
        store.es.indices.delete(index=name)


def measure(path: Path, backend: str) -> dict[str, Any]:
    embedder = Embedder()
    embedder.encode_texts(["warm the model up: its first call pays one-off set-up"] * 8)
    out: dict[str, Any] = {"path": str(path), "backend": backend, "load_before": _load()}
    # The windows ingest will embed, cut beforehand the way it cuts them (checked below
    # against what the store holds), so the raw runs can stand on both sides of the ingest.
    docs, _ = load_collection([path])
    chunks = [c for d in docs for c in chunk_document(d, doc_id_for(d.source), embedder.count_tokens)]
    jobs = embedder.plan(chunks)
    raw_before, raw_cpu_before = raw_encode(embedder, jobs)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(backend, Path(tmp))
        try:
            cpu = time.process_time()
            summary = ingest([path], store, embedder, progress=False)
            ingest_cpu = time.process_time() - cpu
            windows = stored_windows(store)
            stored_chunks = len(store.iter_chunks())
        finally:
            drop(store)
    raw_after, raw_cpu_after = raw_encode(embedder, jobs)
    if (len(jobs), len(chunks)) != (windows, stored_chunks):
        raise SystemExit(f"the store holds {windows} windows of {stored_chunks} chunks, but cutting "
                         f"the collection gave {len(jobs)} of {len(chunks)}")
    doc_s = per_document(embedder, chunks, jobs)
    raw_s = (raw_before + raw_after) / 2
    out.update(
        windows=windows, chunks=len(chunks), tokens=sum(len(j.ids) for j in jobs),
        raw_windows_per_s=round(windows / raw_s, 2),
        ingest_windows_per_s=round(windows / summary.seconds, 2),
        ratio=round(raw_s / summary.seconds, 3),
        raw_seconds=[round(raw_before, 2), round(raw_after, 2)],
        ingest_seconds=round(summary.seconds, 2),
        # CPU seconds of this process (all its threads): on a crowded machine the wall
        # clock is mostly other people's work, the CPU time mostly ours.
        cpu_ratio=round((raw_cpu_before + raw_cpu_after) / 2 / ingest_cpu, 3),
        raw_cpu_seconds=[round(raw_cpu_before, 2), round(raw_cpu_after, 2)],
        ingest_cpu_seconds=round(ingest_cpu, 2),
        per_document_windows_per_s=round(windows / doc_s, 2),
        stages_s={k: round(v, 2) for k, v in summary.stages.items()},
        load_after=_load(),
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=REPO / "examples" / "handbook")
    parser.add_argument("--backend", choices=["embedded", "elasticsearch"], default="embedded")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.path.exists():
        raise SystemExit(f"no such file or folder: {args.path}")
    out = measure(args.path, args.backend)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['path']} → {out['backend']}: {out['windows']} windows, {out['chunks']} chunks, "
          f"{out['tokens']} tokens (load {out['load_before']} → {out['load_after']})")
    print(f"  raw encode      {out['raw_windows_per_s']:8.2f} windows/s  (runs {out['raw_seconds']} s)")
    print(f"  ingest          {out['ingest_windows_per_s']:8.2f} windows/s  ({out['ingest_seconds']} s)  "
          f"ratio {out['ratio']:.3f}")
    print(f"  CPU seconds     raw {out['raw_cpu_seconds']}, ingest {out['ingest_cpu_seconds']}: "
          f"ratio {out['cpu_ratio']:.3f}")
    print(f"  per-doc batches {out['per_document_windows_per_s']:8.2f} windows/s  (the model alone, "
          "one call per document)")
    print("  ingest stages   " + ", ".join(f"{k} {v} s" for k, v in out["stages_s"].items()))


if __name__ == "__main__":
    main()
