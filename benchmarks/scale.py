"""Retrieval at 10k to 1M chunks: load a store, then time hybrid retrieval under load.

    python -m benchmarks.scale --backend elasticsearch|embedded --chunks N
        [--concurrency C] [--reuse] [--shards S] [--passes P] --json

prints one JSON object: {"backend", "chunks", "windows", "load_s", "index_bytes",
"p50_ms", "p95_ms", "p99_ms", "qps", "concurrency", "rss_bytes", ...} and, beside the
contract's fields, "load_vectors", "query_vectors", the stage p50s, the query-embedding
p50 and the load average while it ran.

Text. Debian's rust-doc (benchmarks/corpus.py fetches it at run time into
~/.cache/citebot/bench/rust-doc; never committed): the pages of the 10k corpus's listing,
loaded and chunked by citebot's loader and chunker (without the folder-wide furniture
pass of a real ingest), cached in scale-base.jsonl. The cached base the figures were
measured on was cut from an earlier 899-page listing (895 pages the loader took, 7,266
base chunks); the listing is now 833 pages (redirect stubs left out, chunks counted as ingest
stores them), which a new base would follow. Beyond the base, copy k of base chunk i
(k = 1, 2, ...) is the same passage under the source `copy<k>/<source>` with a
deterministic tenth of its words left out (which words: a generator seeded by k and i),
so copies are near-duplicates with their own term counts, not identical rows. Chunks are
taken in (copy, base order) until N.

Vectors. Loading uses a cheap deterministic encoder, labelled "load_vectors": "hashing"
in the output: a base chunk's vector is its content words hashed into the model's 384
dimensions, each copy and window adds seeded Gaussian noise, normalised. MiniLM on two
cores embeds ~25 windows/s: 1M chunks would take most of a week. Windows per chunk follow
the chunk's model-token count as the cutter did before paragraph windows (256-token windows
overlapping by 48; docs/decisions/0001-paragraph-windows.md), about 1.35 a chunk. Ingest
now embeds a window per paragraph group
(ingest/embedder.py PARAGRAPH_WINDOW_MIN_TOKENS), which gave 1.58 times the windows on the
six labelled collections: a real collection of N chunks holds more vectors than this
benchmark's (the 1M figures in docs/benchmarks.md were measured with 1,346,354). The
questions (benchmarks/corpus.py QUESTIONS, 20 of them) are embedded by the real
model; dense scores are then meaningless as relevance, but the work (HNSW search over the
same number of vectors, the same filters) is the real work.

Timing. Retriever.retrieve in hybrid mode (glossary empty, typo fixing, phrase and rare
rules on), query vectors embedded beforehand, so p50/p95/p99 are retrieval alone (the
embedding's own p50 is "embed_p50_ms"). One warm-up pass, then P passes of the questions
spread over C threads; qps = questions answered / wall time. rss_bytes: resident memory of
the process that serves the queries, the Elasticsearch JVM (from its pid file:
CITEBOT_BENCH_ES_PID_FILE, default the test services' run folder) or this Python process
for the embedded store.

Stores: Elasticsearch alias `citebot-scale-<N>` (`citebot-scale-<N>-s<S>` with `--shards S`
above 1), or the
embedded store under ~/.cache/citebot/bench/rust-doc/scale-<N>. `--reuse` keeps a store
that already holds N chunks (loading 1M chunks once is enough for three concurrencies).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import math
import os
import resource
import shutil
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import corpus
from benchmarks.common import percentile, rss_bytes
from ingest.chunker import chunk_document, chunk_id_for, doc_id_for
from ingest.embedder import MODEL_WINDOW_TOKENS, SPECIAL_TOKENS, WINDOW_OVERLAP_TOKENS, Embedder
from ingest.loaders import load
from search.errors import IngestError
from search.glossary import Glossary
from search.retrieval_config import RetrievalConfig
from search.retrieve import Retriever
from search.text import content_words
from search.types import Chunk, DocumentRecord, ModelStamp, Window

DIMS = 384  # the real model's width, so the query vectors fit
LOAD_STAMP = ModelStamp("scale-benchmark-hashing-encoder", DIMS, "hashing-v1")
# A copy leaves out this share of its base chunk's words.
COPY_DROP_SHARE = 0.1
# Noise added to a base vector per copy and per window (before normalising): copies stay
# near their base (cosine ~0.8) without being the same point for HNSW.
COPY_NOISE = 0.5 / math.sqrt(DIMS)
WINDOW_STEP = MODEL_WINDOW_TOKENS - SPECIAL_TOKENS - WINDOW_OVERLAP_TOKENS
BULK_DOCS = 500
BULK_THREADS = 2
DEFAULT_PASSES = 5
BASE_CACHE = corpus.CACHE / "scale-base.jsonl"


def base_chunks(embedder: Embedder) -> list[tuple[DocumentRecord, list[Chunk]]]:
    """The rust-doc pages of the 10k corpus, loaded and chunked (cached as JSON lines)."""
    if BASE_CACHE.exists():
        out = []
        for line in BASE_CACHE.open(encoding="utf-8"):
            raw = json.loads(line)
            chunks = [Chunk(**{**c, "heading_path": tuple(c["heading_path"])}) for c in raw["chunks"]]
            out.append((DocumentRecord(**raw["doc"]), chunks))
        return out
    pages, _ = corpus.select_pages(embedder)
    out = []
    for page in pages:
        source = page.relative_to(corpus.CACHE).as_posix()
        try:
            doc = load(page, source)
        except IngestError:
            continue
        doc_id = doc_id_for(source)
        chunks = chunk_document(doc, doc_id, embedder.count_tokens)
        record = DocumentRecord(doc_id, source, hashlib.sha256(page.read_bytes()).hexdigest(),
                                doc.title, doc.format)
        out.append((record, chunks))
    tmp = BASE_CACHE.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for record, chunks in out:
            f.write(json.dumps({"doc": asdict(record), "chunks": [asdict(c) for c in chunks]}) + "\n")
    tmp.rename(BASE_CACHE)
    return out


def hashed_vector(text: str) -> np.ndarray:
    v = np.zeros(DIMS, np.float32)
    for word in content_words(text):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        v[h % DIMS] += 1.0 if (h >> 32) & 1 else -1.0
    n = float(np.linalg.norm(v))
    if n == 0.0:
        v[0] = 1.0
        return v
    return v / n


def _varied(text: str, rng: np.random.Generator) -> str:
    """The text with a seeded share of its words left out (whitespace-separated words)."""
    parts = text.split(" ")
    keep = rng.random(len(parts)) >= COPY_DROP_SHARE
    kept = [p for p, k in zip(parts, keep, strict=True) if k]
    return " ".join(kept) if kept else text


def documents(embedder: Embedder, n: int):
    """(record, chunks, windows) in (copy, base) order until n chunks in all."""
    base = base_chunks(embedder)
    vectors = {c.chunk_id: hashed_vector(c.text) for _, cs in base for c in cs}
    made = 0
    copy = 0
    while made < n:
        for b, (record, chunks) in enumerate(base):
            if made >= n:
                return
            chunks = chunks[: n - made]
            rng = np.random.default_rng([copy, b])
            if copy == 0:
                rec, mine = record, chunks
            else:
                source = f"copy{copy}/{record.source}"
                doc_id = doc_id_for(source)
                rec = DocumentRecord(doc_id, source, f"{record.content_hash}-{copy}",
                                     record.title, record.format)
                mine = []
                for c in chunks:
                    text = _varied(c.text, rng)
                    mine.append(Chunk(chunk_id_for(source, c.ordinal, text), doc_id, source,
                                      c.heading_path, c.page, c.ordinal, text, c.tokens))
            windows = []
            for c, orig in zip(mine, chunks, strict=True):
                count = max(1, math.ceil(max(0, orig.tokens - WINDOW_OVERLAP_TOKENS) / WINDOW_STEP))
                step = max(1, len(c.text) // count)
                for w in range(count):
                    v = vectors[orig.chunk_id] + rng.normal(0.0, COPY_NOISE, DIMS).astype(np.float32)
                    v /= np.linalg.norm(v)
                    end = len(c.text) if w == count - 1 else (w + 1) * step
                    windows.append(Window(c.chunk_id, w, w * step, end, v))
            made += len(mine)
            yield rec, mine, windows
        copy += 1


# -- stores -----------------------------------------------------------------------------
def open_elastic(n: int, shards: int):
    from search.elastic import ElasticStore, connect

    alias = f"citebot-scale-{n}" + (f"-s{shards}" if shards > 1 else "")
    return ElasticStore(connect(corpus.elastic_url(), timeout_s=600), alias=alias, shards=shards)


def load_elastic(store, embedder: Embedder, n: int) -> tuple[float, int]:
    """Bulk-load through the store's own document shapes into a new index, then commit
    (which merges the index into one segment per shard, as every ingest does: load_s
    includes the merge)."""
    from elasticsearch.helpers import parallel_bulk

    from search.elastic import mapping, writer

    started = time.perf_counter()
    store.open_for(LOAD_STAMP)
    index = store._build_index()
    windows = 0

    def actions():
        nonlocal windows
        for rec, chunks, wins in documents(embedder, n):
            windows += len(wins)
            yield mapping._document_action(index, rec)
            by_chunk: dict[str, list[Window]] = {}
            for w in wins:
                by_chunk.setdefault(w.chunk_id, []).append(w)
            for c in chunks:
                yield mapping._chunk_action(index, c, by_chunk[c.chunk_id])

    for done, (ok, item) in enumerate(parallel_bulk(store.es.options(request_timeout=600), actions(),
                                  thread_count=BULK_THREADS, chunk_size=BULK_DOCS,
                                  max_chunk_bytes=writer.BULK_MAX_BYTES), start=1):
        if not ok:
            raise SystemExit(f"bulk load refused a document: {item}")
        if done % 50_000 == 0:
            print(f"  {done} documents, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    store.commit_ingest()
    calibrate(store, embedder)
    return time.perf_counter() - started, windows


def elastic_sizes(store) -> tuple[int, int]:
    """(chunks, bytes on disk) of the index behind the alias."""
    stats = store.es.indices.stats(index=store.alias, metric="store,docs").body
    size = sum(i["primaries"]["store"]["size_in_bytes"] for i in stats["indices"].values())
    return store.chunk_count(), size


def elastic_windows(store) -> int:
    res = store.es.search(index=store.alias, size=0, query={"term": {"kind": "chunk"}},
                          aggs={"w": {"nested": {"path": "windows"}}})
    return int(res["aggregations"]["w"]["doc_count"])


def es_rss() -> int | None:
    pid_file = Path(os.environ.get("CITEBOT_BENCH_ES_PID_FILE",
                                   Path(os.environ.get("CITEBOT_RUN_DIR", "/tmp/citebot-services")) / "es" / "es.pid"))
    try:
        pid = int(pid_file.read_text().strip())
        return rss_bytes(pid)
    except (OSError, ValueError):
        return None


def embedded_dir(n: int) -> Path:
    return corpus.CACHE / f"scale-{n}"


def load_embedded(embedder: Embedder, n: int) -> tuple[float, int]:
    from search.embedded import EmbeddedStore

    target = embedded_dir(n)
    shutil.rmtree(target, ignore_errors=True)
    started = time.perf_counter()
    store = EmbeddedStore(target)
    store.open_for(LOAD_STAMP)
    windows = 0
    for rec, chunks, wins in documents(embedder, n):
        store.replace_document(rec, chunks, wins)
        windows += len(wins)
    store.commit_ingest()
    calibrate(store, embedder)
    store.close()
    (target / "loaded.json").write_text(json.dumps({"chunks": n, "windows": windows}))
    return time.perf_counter() - started, windows


# -- timing -----------------------------------------------------------------------------
def calibrate(store, embedder: Embedder) -> None:
    """The refusal gate's calibration from the base chunks' words (search/calibration.py
    would read every chunk of the store for it), so retrieval never measures it."""
    from search import calibration

    texts = [c.text for _, cs in base_chunks(embedder) for c in cs]
    questions = calibration.pseudo_questions(texts)
    best = [max((s for _, s in store.dense(embedder.encode_query(q), 1)), default=0.0)
            for q in questions]
    null = calibration.NullDistribution(round(float(np.mean(best)), 4),
                                        round(float(np.std(best)), 4), len(best))
    store.write_stat(calibration.STAT_KEY, null.as_dict())


def measure(store, embedder: Embedder, concurrency: int, passes: int) -> dict[str, Any]:
    questions = list(corpus.QUESTIONS)
    embed_ms = []
    vectors = {}
    embedder.encode_query(questions[0])  # the model's first call pays for its set-up
    for q in questions:
        t = time.perf_counter()
        vectors[q] = embedder.encode_query(q)
        embed_ms.append((time.perf_counter() - t) * 1000)
    retriever = Retriever(store, vectors.__getitem__, Glossary.empty(), RetrievalConfig(mode="hybrid"))
    for q in questions:  # warm-up (caches, HNSW pages, the calibration read)
        retriever.retrieve(q)
    work = [q for _ in range(passes) for q in questions]
    lock = threading.Lock()
    totals: list[float] = []
    stages: dict[str, list[float]] = {}

    def one(q: str) -> None:
        t = time.perf_counter()
        r = retriever.retrieve(q)
        ms = (time.perf_counter() - t) * 1000
        with lock:
            totals.append(ms)
            for k, v in r.timings_ms.items():
                stages.setdefault(k, []).append(v)

    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, work))
    wall = time.perf_counter() - started
    return {
        "p50_ms": round(percentile(totals, 50), 2),
        "p95_ms": round(percentile(totals, 95), 2),
        "p99_ms": round(percentile(totals, 99), 2),
        "min_ms": round(min(totals), 2),
        "qps": round(len(work) / wall, 2),
        "queries": len(work),
        "stage_p50_ms": {k: round(percentile(v, 50), 2) for k, v in stages.items() if k != "total"},
        "embed_p50_ms": round(percentile(embed_ms, 50), 2),
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def shard_agreement(store, embedder: Embedder, n: int) -> dict[str, float] | None:
    """Against the one-shard index of the same chunks (when loaded): the share of questions
    with the same hybrid top 10 (ids in order) and the mean overlap of the two top-10 sets.
    Phrase scores use each shard's statistics (search/elastic/query.py), so this measures
    that approximation."""
    one = open_elastic(n, 1)
    try:
        if one.chunk_count() != n:
            return None
        vectors = {q: embedder.encode_query(q) for q in corpus.QUESTIONS}
        tops = [[[h.chunk.chunk_id for h in Retriever(s, vectors.__getitem__).retrieve(q).hits[:10]]
                 for q in corpus.QUESTIONS] for s in (one, store)]
    finally:
        one.close()
    same = sum(a == b for a, b in zip(*tops, strict=True)) / len(corpus.QUESTIONS)
    overlap = sum(len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(*tops, strict=True))
    return {"same_top10": round(same, 3), "top10_overlap": round(overlap / len(corpus.QUESTIONS), 3)}


def numpy_scan(chunk_counts: list[int], windows_per_chunk: float, repeats: int = 20) -> list[dict]:
    """The embedded store's exact dense scan (search/embedded.py EmbeddedStore.dense: one
    matrix product, the best window per chunk, a sort) on random unit vectors of each size:
    its p50 and the matrix's memory, without SQLite or a loaded store."""
    rng = np.random.default_rng(0)
    rows = []
    for n in chunk_counts:
        w = int(n * windows_per_chunk)
        matrix = rng.standard_normal((w, DIMS), dtype=np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        owner = np.sort(rng.integers(0, n, w))
        q = matrix[0].copy()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            scores = matrix @ q
            best = np.full(n, -np.inf, dtype=np.float32)
            np.maximum.at(best, owner, scores)
            np.argsort(-best, kind="stable")[:30]
            times.append((time.perf_counter() - t) * 1000)
        rows.append({"chunks": n, "windows": w, "scan_p50_ms": round(percentile(times, 50), 2),
                     "scan_min_ms": round(min(times), 2),
                     "matrix_bytes": matrix.nbytes})
        del matrix
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("elasticsearch", "embedded"))
    parser.add_argument("--chunks", type=int)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--passes", type=int, default=DEFAULT_PASSES,
                        help="passes over the 20 questions after the warm-up")
    parser.add_argument("--shards", type=int, default=1, help="primary shards of a new index")
    parser.add_argument("--reuse", action="store_true",
                        help="keep a store that already holds --chunks chunks")
    parser.add_argument("--numpy-scan", metavar="N,N,...",
                        help="only time the embedded store's exact vector scan at these chunk counts")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.numpy_scan:
        # 1.35 windows per chunk: the rust-doc corpus (135,125 windows for 100,000 chunks).
        rows = numpy_scan([int(x) for x in args.numpy_scan.split(",")], 1.35)
        print(json.dumps({"numpy_scan": rows, "load_average": round(os.getloadavg()[0], 2)}))
        return
    if args.backend is None or args.chunks is None:
        parser.error("--backend and --chunks are required (or --numpy-scan)")
    if args.chunks < 1 or args.concurrency < 1 or args.passes < 1:
        parser.error("--chunks, --concurrency and --passes must be at least 1")
    embedder = Embedder()
    out: dict[str, Any] = {"backend": args.backend, "chunks": args.chunks,
                           "concurrency": args.concurrency}
    load_s: float | None = None
    if args.backend == "elasticsearch":
        store = open_elastic(args.chunks, args.shards)
        if not (args.reuse and store.chunk_count() == args.chunks):
            load_s, _ = load_elastic(store, embedder, args.chunks)
        chunks, size = elastic_sizes(store)
        windows = elastic_windows(store)
        figures = measure(store, embedder, args.concurrency, args.passes)
        rss = es_rss()
        stats = store.es.indices.get_settings(index=store.alias).body
        shards = int(next(iter(stats.values()))["settings"]["index"]["number_of_shards"])
        out["shards"] = shards
        if shards > 1:
            out["vs_one_shard"] = shard_agreement(store, embedder, args.chunks)
        out["es_heap_max_bytes"] = next(iter(store.es.nodes.stats(metric="jvm").body["nodes"].values()))[
            "jvm"]["mem"]["heap_max_in_bytes"]
    else:
        from search.embedded import EmbeddedStore

        marker = embedded_dir(args.chunks) / "loaded.json"
        if not (args.reuse and marker.exists()):
            load_s, _ = load_embedded(embedder, args.chunks)
        store = EmbeddedStore(embedded_dir(args.chunks))
        chunks = store.chunk_count()
        windows = json.loads(marker.read_text())["windows"]
        size = sum(p.stat().st_size for p in embedded_dir(args.chunks).iterdir() if p.is_file())
        figures = measure(store, embedder, args.concurrency, args.passes)
        rss = rss_bytes()
        out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out.update({
        "chunks": chunks, "windows": windows, "load_s": round(load_s, 1) if load_s is not None else None,
        "index_bytes": size, **{k: figures[k] for k in ("p50_ms", "p95_ms", "p99_ms", "qps")},
        "rss_bytes": rss, "load_vectors": "hashing", "query_vectors": embedder.stamp.name,
        "reused": load_s is None,
        **{k: figures[k] for k in ("min_ms", "queries", "stage_p50_ms", "embed_p50_ms", "load_average")},
    })
    store.close()
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:16} {v}")


if __name__ == "__main__":
    main()
