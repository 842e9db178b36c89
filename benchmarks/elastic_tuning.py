"""Settings of the Elasticsearch store, measured: vector layout, quantisation,
num_candidates, segments, and how the lexical arm's ranking compares with the embedded one.

kNN: recall@30 and recall@5 of Elasticsearch's kNN against exact search (the embedded
store's numpy scan, a chunk scoring by its best window) and the p50/p95 time of one kNN
request. Lexical: the share of queries whose top 30 (ids and order) and top 5 (set)
equal the embedded store's, and the p50/p95 time of ElasticStore.lexical (Elasticsearch's
own BM25, docs/decisions/0018-elasticsearch-bm25.md: equal ranks are not the goal, equal
quality is; see benchmarks/quality.py). On the large corpus (10,000+
chunks) and on examples/.

Layouts:
  nested      one document per chunk, its windows as nested vectors (search/elastic/mapping.py)
  per-window  one document per window, collapsed to its chunk (k x windows-per-chunk
              hits asked for, so k distinct chunks survive the collapse)
Quantisation (index_options.type): hnsw (float), int8_hnsw, bbq_hnsw (this version's
default for 384 dimensions: 1-bit vectors, rescored 3x on floats).

    eval "$(scripts/services start)"
    .venv/bin/python -m benchmarks.elastic_tuning [--corpus examples|rust|both] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from typing import Any

import numpy as np

from benchmarks import corpus
from ingest.embedder import Embedder
from search.elastic import ElasticStore, connect, mapping
from search.embedded import EmbeddedStore

K = 30  # the Retriever's pool (search.retrieval_config.POOL_SIZE)
CANDIDATES = (30, 60, 100, 200, 400)
QUANTISATIONS = ("hnsw", "int8_hnsw", "bbq_hnsw")
REPEATS = 3
# Windows per chunk asked for in the per-window layout before collapsing, a guess:
# rust-doc's chunks have 1.58 windows on average and up to 17, and asking for 4, 8 or 17
# gave the same recall there (docs/decisions/0017-knn-tuning.md).
PER_WINDOW_FACTOR = 4


def query_vectors(embedder: Embedder, store: EmbeddedStore, questions: list[str]) -> np.ndarray:
    """The benchmark questions, plus 20 heading paths of chunks spread over the corpus."""
    chunks = store.iter_chunks()
    step = max(1, len(chunks) // 20)
    headings = [" > ".join(c.heading_path) or c.text[:80] for c in chunks[::step][:20]]
    return np.stack([embedder.encode_query(q) for q in questions + headings])


def build_nested(source: EmbeddedStore, alias: str, quantisation: str) -> ElasticStore:
    options = {"type": quantisation, "m": 16, "ef_construction": 100}
    saved = mapping.INDEX_OPTIONS
    mapping.INDEX_OPTIONS = options
    try:
        return corpus.elastic_copy(source, alias)
    finally:
        mapping.INDEX_OPTIONS = saved


def build_per_window(source: EmbeddedStore, index: str) -> None:
    from elasticsearch.helpers import bulk

    client = connect(corpus.elastic_url(), timeout_s=300)
    dims = source.stamp().dims  # type: ignore[union-attr]
    if client.indices.exists(index=index):
        if client.count(index=index)["count"] > 0:
            return
        client.indices.delete(index=index)
    client.indices.create(index=index, settings={"number_of_shards": 1, "number_of_replicas": 0},
                          mappings={"properties": {
                              "chunk_id": {"type": "keyword"},
                              "vector": {"type": "dense_vector", "dims": dims, "similarity": "cosine",
                                         "index_options": {"type": "hnsw"}}}})
    actions = (
        {"_index": index, "_id": f"{w.chunk_id}/{w.index}",
         "_source": {"chunk_id": w.chunk_id, "vector": w.vector.tolist()}}
        for d in corpus.stored_documents(source) for w in d.windows
    )
    bulk(client, actions, chunk_size=500)
    client.indices.refresh(index=index)
    client.close()


def knn_nested(client, alias: str, v: np.ndarray, candidates: int) -> tuple[list[str], float]:
    t = time.perf_counter()
    res = client.search(index=alias, knn={"field": "windows.vector", "query_vector": v.tolist(),
                                          "k": K, "num_candidates": max(K, candidates)},
                        size=K, source=False)
    return [h["_id"] for h in res["hits"]["hits"]], (time.perf_counter() - t) * 1000


def knn_per_window(client, index: str, v: np.ndarray, candidates: int) -> tuple[list[str], float]:
    k = K * PER_WINDOW_FACTOR
    t = time.perf_counter()
    res = client.search(index=index, knn={"field": "vector", "query_vector": v.tolist(), "k": k,
                                          "num_candidates": max(k, candidates)},
                        collapse={"field": "chunk_id"}, size=K, source=False,
                        fields=["chunk_id"])
    return ([h["fields"]["chunk_id"][0] for h in res["hits"]["hits"]],
            (time.perf_counter() - t) * 1000)


def measure(search, target: str, vectors: np.ndarray, exact: list[list[str]], candidates: int,
            client) -> dict[str, float]:
    recalls, recalls5, times = [], [], []
    for _ in range(REPEATS):
        for v, truth in zip(vectors, exact, strict=True):
            found, ms = search(client, target, v, candidates)
            times.append(ms)
            recalls.append(len(set(found) & set(truth)) / len(truth))
            recalls5.append(len(set(found[:5]) & set(truth[:5])) / 5)
    times.sort()
    return {
        "recall_at_30": round(statistics.mean(recalls), 4),
        "recall_at_5": round(statistics.mean(recalls5), 4),
        "p50_ms": round(times[len(times) // 2], 2),
        "p95_ms": round(times[int(len(times) * 0.95)], 2),
    }


def segments(client, name: str) -> int:
    stats = client.indices.stats(index=name, metric="segments").body
    return sum(v["primaries"]["segments"]["count"] for v in stats["indices"].values())


def vector_mb(client, name: str) -> float:
    """Disk taken by the vector files (HNSW graph, raw and quantised vectors)."""
    with warnings.catch_warnings():  # the disk usage API is a technical preview
        warnings.simplefilter("ignore")
        stats = client.indices.disk_usage(index=name, run_expensive_tasks=True).body
    total = 0
    for index, usage in stats.items():
        if index != "_shards":
            total += sum(f.get("knn_vectors_in_bytes", 0) for f in usage["fields"].values())
    return round(total / 2**20, 1)


def run(name: str, source: EmbeddedStore, questions: list[str], embedder: Embedder,
        only: str | None = None) -> list[dict[str, Any]]:
    if only == "lexical":
        return lexical_rows(name, source, questions)
    vectors = query_vectors(embedder, source, questions)
    exact = [[cid for cid, _ in source.dense(v, K)] for v in vectors]
    client = connect(corpus.elastic_url(), timeout_s=300).options(request_timeout=900)
    rows: list[dict[str, Any]] = []

    def knn_rows(layout: str, quantisation: str, target: str, search, candidates, note: str) -> None:
        mb = vector_mb(client, target)
        segs = segments(client, target)
        for c in candidates:
            search(client, target, vectors[0], c)  # warm
            rows.append({"corpus": name, "kind": "knn", "layout": layout,
                         "quantisation": quantisation, "segments": segs, "num_candidates": c,
                         "vector_mb": mb, "note": note}
                        | measure(search, target, vectors, exact, c, client))
            print(rows[-1], file=sys.stderr)

    for quantisation in QUANTISATIONS:
        alias = f"citebot-bench-knn-{name}-{quantisation.replace('_', '-')}"
        build_nested(source, alias, quantisation)
        if quantisation == "hnsw":  # as an ingest leaves it, then merged to one segment
            knn_rows("nested", quantisation, alias, knn_nested, CANDIDATES, "as committed")
        client.indices.forcemerge(index=alias, max_num_segments=1)
        knn_rows("nested", quantisation, alias, knn_nested, CANDIDATES, "merged")
    index = f"citebot-bench-knn-{name}-per-window"
    build_per_window(source, index)
    client.indices.forcemerge(index=index, max_num_segments=1)
    knn_rows("per-window", "hnsw", index, knn_per_window,
             [c for c in CANDIDATES if c >= K * PER_WINDOW_FACTOR] or [K * PER_WINDOW_FACTOR],
             "merged")
    if only is None:
        rows.extend(lexical_rows(name, source, questions))
    client.close()
    return rows


def lexical_rows(name: str, source: EmbeddedStore, questions: list[str]) -> list[dict[str, Any]]:
    """How often ElasticStore.lexical ranks as the embedded store, and what it costs."""
    from search.text import content_words
    from search.types import LexicalQuery, WeightedTerms

    store = corpus.elastic_copy(source, f"citebot-bench-knn-{name}-hnsw")
    chunks = source.iter_chunks()
    step = max(1, len(chunks) // 20)
    sets = {"questions": questions,
            "headings": [" ".join(c.heading_path) for c in chunks[::step][:20]]}
    rows = []
    for queries_of, texts in sets.items():
        queries = [LexicalQuery((WeightedTerms(tuple(content_words(t))),)) for t in texts]
        queries = [q for q in queries if q.groups[0].terms]
        truth = [[cid for cid, _ in source.lexical(q, K)] for q in queries]
        store.lexical(queries[0], K)  # warm
        same, same5, times = 0, 0, []
        for _ in range(REPEATS):
            for q, t in zip(queries, truth, strict=True):
                started = time.perf_counter()
                got = [cid for cid, _ in store.lexical(q, K)]
                times.append((time.perf_counter() - started) * 1000)
                same += got == t
                same5 += set(got[:5]) == set(t[:5])
        times.sort()
        n = REPEATS * len(queries)
        rows.append({"corpus": name, "kind": "lexical", "queries": queries_of,
                     "same_top30": round(same / n, 3), "same_top5": round(same5 / n, 3),
                     "p50_ms": round(times[len(times) // 2], 2),
                     "p95_ms": round(times[int(len(times) * 0.95)], 2)})
        print(rows[-1], file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("examples", "rust", "both"), default="both")
    parser.add_argument("--only", choices=("knn", "lexical"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = Embedder()
    rows: list[dict[str, Any]] = []
    if args.corpus in ("examples", "both"):
        rows += run("examples", corpus.examples_store(embedder), corpus.examples_questions(),
                    embedder, args.only)
    if args.corpus in ("rust", "both"):
        rows += run("rust", corpus.embedded_store(embedder), corpus.QUESTIONS, embedder,
                    args.only)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'corpus':9} {'layout':11} {'quantisation':12} {'note':12} {'segments':>8} {'cands':>5} "
          f"{'vec MB':>6} {'R@30':>6} {'R@5':>6} {'p50 ms':>7} {'p95 ms':>7}")
    for r in rows:
        if r["kind"] == "knn":
            print(f"{r['corpus']:9} {r['layout']:11} {r['quantisation']:12} {r['note']:12} {r['segments']:>8} "
                  f"{r['num_candidates']:>5} {r['vector_mb']:>6} {r['recall_at_30']:>6.3f} "
                  f"{r['recall_at_5']:>6.3f} {r['p50_ms']:>7} {r['p95_ms']:>7}")
    print(f"\n{'corpus':9} {'queries':9} {'same top 30':>11} "
          f"{'same top 5':>10} {'p50 ms':>7} {'p95 ms':>7}")
    for r in rows:
        if r["kind"] == "lexical":
            print(f"{r['corpus']:9} {r['queries']:9} "
                  f"{r['same_top30']:>11.3f} {r['same_top5']:>10.3f} {r['p50_ms']:>7} "
                  f"{r['p95_ms']:>7}")


if __name__ == "__main__":
    main()
