"""The embedded store's dense scan: the float scan against the int8 one (search/embedded_scan.py).

    .venv/bin/python -m benchmarks.dense_scan [--sizes 1024,2048,4096,8192,16384] [--rust] [--json]

For each size, a matrix of 384-dimensional unit vectors clustered as a collection's are
(a few topics, two windows a chunk), and 20 questions near its windows; with --rust also the
rust-doc corpus's own matrix and its benchmark questions (benchmarks/corpus.py; built once).
The two scans alternate question by question in one process, one thread each, k=30 (the
arms' pool, search/retrieval_config.py). Prints per matrix: each scan's p50 and p95 (ms),
float over int8 (p50), the chunks and windows the int8 scan scored exactly (median), its
build time and the bytes it holds beside the matrix; and how many questions each scan
ranked exactly as the same scan in float64 does (the float32 scan can swap two chunks whose
cosines differ by less than its rounding).
"""

from __future__ import annotations

import argparse
import json
import time

import bot  # noqa: F401 - before numpy: its BLAS on one thread as in citebot (bot/__init__.py)

# isort: split
import numpy as np

from benchmarks.common import percentile
from search import embedded_scan

K = 30
DIMS = 384
PASSES = 5


def float_top(matrix: np.ndarray, owner: np.ndarray, chunks: int, v: np.ndarray, k: int) -> list[int]:
    """The store's float scan, without a scope."""
    return embedded_scan.float_top(matrix, owner, chunks, v, k, None)[0].tolist()


def exact_top(matrix: np.ndarray, owner: np.ndarray, chunks: int, v: np.ndarray, k: int) -> list[int]:
    """The same scan in float64, its scores then rounded to float32 (equal ones in chunk
    order): the order both are checked against."""
    scores = (matrix.astype(np.float64) @ v.astype(np.float64)).astype(np.float32)
    best = np.full(chunks, -np.inf, dtype=np.float32)
    np.maximum.at(best, owner, scores)
    return np.argsort(-best, kind="stable")[:k].tolist()


def synthetic(rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, list[np.ndarray]]:
    topics = rng.standard_normal((max(rows // 200, 4), DIMS), dtype=np.float32)
    m = topics[rng.integers(0, len(topics), rows)]
    m += np.float32(0.6) * rng.standard_normal((rows, DIMS), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    owner = np.arange(rows) // 2
    questions = []
    for i in rng.integers(0, rows, 20):
        q = m[i] + 0.8 * rng.standard_normal(DIMS) / np.sqrt(DIMS)
        questions.append((q / np.linalg.norm(q)).astype(np.float32))
    return m, owner, int(owner[-1]) + 1, questions


def rust() -> tuple[np.ndarray, np.ndarray, int, list[np.ndarray]]:
    from benchmarks import corpus
    from ingest.embedder import Embedder

    embedder = Embedder()
    store = corpus.embedded_store(embedder)
    matrix, owner, ids, _ = store._vectors()
    return matrix, owner, len(ids), [embedder.encode_query(q).astype(np.float32) for q in corpus.QUESTIONS]


def measure(name: str, matrix: np.ndarray, owner: np.ndarray, chunks: int, questions: list[np.ndarray]) -> dict:
    started = time.perf_counter()
    scan = embedded_scan.Int8Scan(matrix, owner, chunks)
    build_ms = (time.perf_counter() - started) * 1000
    held = scan.scale.nbytes + scan.error.nbytes + scan.norm.nbytes + matrix.shape[0] * matrix.shape[1]
    times: dict[str, list[float]] = {"float": [], "int8": []}
    same = float_same = 0
    for v in questions:  # warm; and both against the scan in float64
        exact = exact_top(matrix, owner, chunks, v, K)
        top = scan.top(v, K, None)
        same += top is not None and top[0].tolist() == exact
        float_same += float_top(matrix, owner, chunks, v, K) == exact
    for _ in range(PASSES):
        for v in questions:
            for kind in ("float", "int8"):
                started = time.perf_counter()
                if kind == "float":
                    float_top(matrix, owner, chunks, v, K)
                else:
                    scan.top(v, K, None)
                times[kind].append((time.perf_counter() - started) * 1000)
    kept = [scan.candidates(v, K, None) for v in questions]
    return {
        "matrix": name,
        "windows": int(matrix.shape[0]),
        "chunks": chunks,
        "float_p50": round(percentile(times["float"], 50), 3),
        "float_p95": round(percentile(times["float"], 95), 3),
        "int8_p50": round(percentile(times["int8"], 50), 3),
        "int8_p95": round(percentile(times["int8"], 95), 3),
        "float_over_int8": round(percentile(times["float"], 50) / percentile(times["int8"], 50), 2),
        "scored_chunks_p50": float(np.median([k.sum() for k in kept])),
        "scored_windows_p50": float(np.median([k[owner].sum() for k in kept])),
        "build_ms": round(build_ms, 1),
        "held_bytes": int(held),
        "same_order": f"{same}/{len(questions)}",
        "float_same_order": f"{float_same}/{len(questions)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1024,2048,4096,8192,16384")
    parser.add_argument("--rust", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = [measure(f"synthetic {n}", *synthetic(n, rng)) for n in (int(s) for s in args.sizes.split(",") if s)]
    if args.rust:
        rows.append(measure("rust-doc", *rust()))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'matrix':<16} {'windows':>8} {'float p50':>9} {'p95':>6} {'int8 p50':>8} {'p95':>6} {'ratio':>6} "
        f"{'scored ch':>9} {'win':>5} {'build ms':>8} {'held MB':>7} as float64 (int8, float)"
    )
    for r in rows:
        print(
            f"{r['matrix']:<16} {r['windows']:>8} {r['float_p50']:>9} {r['float_p95']:>6} {r['int8_p50']:>8} "
            f"{r['int8_p95']:>6} {r['float_over_int8']:>6} {r['scored_chunks_p50']:>9} {r['scored_windows_p50']:>5.0f} "
            f"{r['build_ms']:>8} {r['held_bytes'] / 1e6:>7.1f} {r['same_order']}, {r['float_same_order']}"
        )


if __name__ == "__main__":
    main()
