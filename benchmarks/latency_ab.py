"""Retrieval latency per stage of two revisions, interleaved pass by pass in one run.

    git archive main | (mkdir -p /tmp/base && tar -x -C /tmp/base)
    CITEBOT_BENCH_ES_URL=http://127.0.0.1:PORT .venv/bin/python -m benchmarks.latency_ab --base /tmp/base \
        [--rounds N] [--concurrency C] [--json]

On a shared machine two runs of `benchmarks.retrieval_latency` minutes apart differ by more
than most changes (the query embedding alone went 15 → 31 ms between runs at load 6). Here
one worker process per revision (this checkout and --base, each importing its own code)
loads the rust-doc corpus (benchmarks/corpus.py) on both backends and warms up; then the
workers take turns, one pass over the questions each, in the order A B B A, so that load
that comes and goes falls on both alike. Prints each stage's p50 (p95) per revision and
backend, over all passes. With --concurrency C a pass asks its questions from C threads at
once, as the bot's turn threads do (bot/slack/pool.py TURN_WORKERS), and the figures gain
`wall` (ms per pass). On Linux each retrieval also gives its calling thread's CPU time and
its wait for a core (`caller_cpu`, `caller_runq`, from /proc/self/task/TID/schedstat):
where two threads of one process get no more CPU than one, the second shows as the first's
wait (docs/decisions/0052-overlapped-arms.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import REPO

STAGES = ("analyse", "embed", "dense", "dense_wait", "lexical", "fuse", "total", "caller_cpu", "caller_runq", "wall")
BACKENDS = ("embedded", "elasticsearch")


def _schedstat() -> tuple[float, float]:
    """The calling thread's CPU time and time runnable but waiting for a core, ms (0, 0
    where the kernel does not say)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            cpu, runq = f.read().split()[:2]
    except OSError:
        return 0.0, 0.0
    return int(cpu) / 1e6, int(runq) / 1e6


def _timed(retriever, question: str) -> dict[str, float]:
    cpu, runq = _schedstat()
    timings = dict(retriever.retrieve(question).timings_ms)
    cpu_after, runq_after = _schedstat()
    return {**timings, "caller_cpu": round(cpu_after - cpu, 2), "caller_runq": round(runq_after - runq, 2)}


def worker() -> None:
    """Answer `pass BACKEND THREADS` on stdin with one JSON line of stage timings (lists, ms)."""
    import bot  # noqa: F401 - numpy's BLAS threads as in citebot
    from benchmarks import corpus
    from ingest.embedder import Embedder
    from search.glossary import Glossary
    from search.retrieve import Retriever

    embedder = Embedder()
    source = corpus.embedded_store(embedder)
    if hasattr(source, "build_postings"):  # a server's steady state (search/embedded_postings.py)
        source.build_postings()
    if hasattr(source, "build_scan"):  # and its int8 dense scan (search/embedded_scan.py)
        source.build_scan()
    try:  # an index per layout: the revision compared with may read only its own
        from search.elastic.mapping import INDEX_FORMAT

        alias = f"citebot-bench-rust-f{INDEX_FORMAT}"
    except ImportError:
        alias = "citebot-bench-rust"
    stores = {"embedded": source, "elasticsearch": corpus.elastic_copy(source, alias)}
    retrievers = {b: Retriever(s, embedder.encode_query, Glossary.empty()) for b, s in stores.items()}
    tops = {}
    for backend, retriever in retrievers.items():  # warm: caches, calibration, HNSW pages
        tops[backend] = [[h.chunk.chunk_id for h in retriever.retrieve(q).hits[:5]] for q in corpus.QUESTIONS]
    print(json.dumps({"ready": True, "tops": tops}), flush=True)
    for line in sys.stdin:
        _, backend, threads = line.split()
        samples: dict[str, list[float]] = {}
        started = time.perf_counter()
        with ThreadPoolExecutor(int(threads)) as pool:
            asked = [retrievers[backend]] * len(corpus.QUESTIONS)
            for timings in pool.map(_timed, asked, corpus.QUESTIONS):
                for stage, ms in timings.items():
                    samples.setdefault(stage, []).append(ms)
        samples["wall"] = [(time.perf_counter() - started) * 1000]
        print(json.dumps(samples), flush=True)


def start(tree: Path) -> subprocess.Popen:
    """A worker running this file's worker() on the code of `tree` (first on the path; the
    tree may predate this file)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    run = f"import runpy, sys; sys.argv = ['latency_ab', '--worker']; runpy.run_path({str(Path(__file__))!r}, run_name='__main__')"
    proc = subprocess.Popen(
        [sys.executable, "-c", run], cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    proc.tops = ready["tops"]  # type: ignore[attr-defined]
    return proc


def _figure(f: dict | None) -> str:
    return f"{f['p50']:7.2f} ({f['p95']:6.1f})" if f else f"{'—':>16s}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--rounds", type=int, default=6, help="A B B A rounds per backend")
    parser.add_argument("--concurrency", type=int, default=1, help="threads asking at once in a pass")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    if args.base is None or not (args.base / "benchmarks" / "corpus.py").is_file():
        raise SystemExit("--base must be a checkout of citebot (e.g. git archive main | tar -x -C DIR)")
    trees = {"base": args.base.resolve(), "this": REPO}
    procs = {name: start(tree) for name, tree in trees.items()}
    samples: dict[str, dict[str, dict[str, list[float]]]] = {n: {b: {} for b in BACKENDS} for n in trees}
    order = ["base", "this", "this", "base"]
    for _ in range(args.rounds):
        for backend in BACKENDS:
            for name in order:
                proc = procs[name]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"pass {backend} {args.concurrency}\n")
                proc.stdin.flush()
                for stage, values in json.loads(proc.stdout.readline()).items():
                    samples[name][backend].setdefault(stage, []).extend(values)
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    from benchmarks.retrieval_latency import stage_figures  # here, not in the worker: --base may predate it

    result = {
        name: {backend: stage_figures(stages) for backend, stages in by_backend.items()}
        for name, by_backend in samples.items()
    }
    result["same_top5_base_this"] = {
        b: sum(set(x) == set(y) for x, y in zip(procs["base"].tops[b], procs["this"].tops[b], strict=True))  # type: ignore[attr-defined]
        for b in BACKENDS
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for backend in BACKENDS:
        print(f"\n{backend}: p50 (p95) ms, base → this")
        for s in STAGES:
            a, b = result["base"][backend].get(s), result["this"][backend].get(s)
            if a or b:
                print(f"  {s:10s} {_figure(a)} → {_figure(b)}")
    print(f"same top 5 (as a set), of {len(procs['base'].tops['embedded'])}: {result['same_top5_base_this']}")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
