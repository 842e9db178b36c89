"""Questions beside another process that writes turns, on the 10k-chunk rust-doc corpus:
the embedded store's caches (vector matrix, scope masks, lexical postings, spelling index)
keyed on the collection's content version (m014's counter, search/embedded_migrations.py)
against SQLite's data_version, which every commit moves, as they were keyed before
(docs/decisions/0064-collection-content-version.md).

The rust-doc store (benchmarks/corpus.py, built once into the cache) is copied into a
temporary folder with SQLite's backup and only the copy is opened and written: the cache
stays as it was built. For each keying, in the same run: its postings built (a server's
quiet state), one warm pass, `--passes` passes over the questions with nobody else
writing, then as many while a second process (this module with --writer) writes a turn
every `--every-ms` ms with put_turn, as `citebot chat` or `citebot ask` beside a server
does, then as many again with one turn committed by another connection just before each
question (what one such write costs the next question). Printed per keying and phase:
Retriever.retrieve's total p50/p95 per question (ms), how many questions read a newly
loaded vector matrix, how many lexical reads the postings in memory answered (the others
FTS5); each phase over quiet, and the old keying over the new per phase.

--writes measures what m014's triggers add to the write path: every document of the
examples store and of the rust store written into a fresh store (replace_document, what
an ingest does once it has embedded them), with the triggers and with them dropped: CPU
and wall seconds per collection, best of `--rounds`, taking turns, and how many times the
triggers fired (the counter's move).

    .venv/bin/python -m benchmarks.content_version [--passes 3] [--every-ms 200] [--writes [--rounds 3]] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bot  # noqa: F401 - first: numpy's BLAS threads as in citebot (bot/__init__.py, blas_threads.py)
from benchmarks import corpus
from benchmarks.common import percentile
from ingest.embedder import Embedder
from search.embedded import DB_NAME, EmbeddedStore
from search.glossary import Glossary
from search.retrieval_config import RetrievalConfig
from search.retrieve import Retriever


class DataVersionKeyed(EmbeddedStore):
    """The caches keyed as before the content version: on every commit by another connection."""

    def _collection_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])


KEYINGS = {"content": EmbeddedStore, "data_version": DataVersionKeyed}


# The stores benchmarks/corpus.py builds into its cache, and how to build each.
CACHED = {"examples": ("examples-embedded", "benchmarks.retrieval_latency --corpus examples"),
          "rust": ("embedded", "benchmarks.corpus --build")}


def cached(name: str) -> Path:
    """A cached store's folder, never opened here (opening would run this citebot's schema steps on it)."""
    folder, build = CACHED[name]
    path = corpus.CACHE / folder
    if not (path / DB_NAME).exists():
        raise SystemExit(f"no {name} store at {path}: run `.venv/bin/python -m {build}` first")
    return path


def copy_store(source: Path, target: Path) -> None:
    """SQLite's online backup of a store's file, the source opened read-only."""
    target.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{source / DB_NAME}?mode=ro", uri=True)
    dst = sqlite3.connect(target / DB_NAME)
    src.backup(dst)
    dst.close()
    src.close()


def writer(directory: Path, every_ms: float) -> None:
    """A turn every `every_ms` until killed, as a one-question command writes its turn."""
    store = EmbeddedStore(directory)
    n = 0
    while True:
        n += 1
        store.put_turn(f"bench-writer-{n}", time.strftime("%Y-%m-%dT%H:%M:%S+00:00"), {"question": "q", "n": n})
        print(n, flush=True)
        time.sleep(every_ms / 1000)


def count_postings(store: EmbeddedStore) -> list[int]:
    """[lexical reads, those the postings in memory answered]: the store's reads counted."""
    counts = [0, 0]
    read = store._postings

    def counted():
        postings = read()
        counts[0] += 1
        counts[1] += postings is not None
        return postings

    store._postings = counted  # type: ignore[method-assign]
    return counts


def questions_pass(store: EmbeddedStore, retriever: Retriever, questions: list[str], samples: dict) -> None:
    for q in questions:
        before = store._matrix[1] if store._matrix else None
        total = retriever.retrieve(q).timings_ms["total"]
        samples["ms"].append(total)
        samples["loads"] += int(store._matrix is not None and store._matrix[1] is not before)


def figures(samples: dict) -> dict[str, Any]:
    v = samples["ms"]
    return {"p50": round(percentile(v, 50), 2), "p95": round(percentile(v, 95), 2), "n": len(v),
            "matrix_loads": samples["loads"], "lexical_reads": samples["reads"][0],
            "from_postings": samples["reads"][1]}


def beside_a_writer(directory: Path, embedder: Embedder, questions: list[str], passes: int,
                    every_ms: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for keying, cls in KEYINGS.items():
        store = cls(directory)
        store.build_postings()
        retriever = Retriever(store, embedder.encode_query, Glossary.empty(), RetrievalConfig())
        for q in questions:  # warm
            retriever.retrieve(q)
        reads = count_postings(store)
        quiet = {"ms": [], "loads": 0, "reads": reads}
        for _ in range(passes):
            questions_pass(store, retriever, questions, quiet)
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.content_version", "--writer", str(directory),
                                 "--every-ms", str(every_ms)], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # its first turn is committed
            quiet["reads"], reads[:] = list(reads), [0, 0]
            busy = {"ms": [], "loads": 0, "reads": reads}
            for _ in range(passes):
                questions_pass(store, retriever, questions, busy)
        finally:
            proc.terminate()
            proc.wait()
        # Each question right after one turn committed by another connection: the cost per event.
        other = sqlite3.connect(directory / DB_NAME, isolation_level=None)
        reads[:] = [0, 0]
        after = {"ms": [], "loads": 0, "reads": reads}
        for p in range(passes):
            for i, q in enumerate(questions):
                other.execute("INSERT INTO turns VALUES (?, ?, '{}')", (f"bench-after-{keying}-{p}-{i}", "2026-01-01"))
                questions_pass(store, retriever, [q], after)
        other.close()
        out[keying] = {"quiet": figures(quiet), "writer": figures(busy), "after_turn": figures(after)}
        store.close()
    return out


def drop_triggers(directory: Path) -> None:
    db = sqlite3.connect(directory / DB_NAME)
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'content_version_%'"):
        db.execute(f"DROP TRIGGER {name}")
    db.commit()
    db.close()


def write_path(sources: dict[str, EmbeddedStore], rounds: int) -> dict[str, dict[str, float]]:
    """CPU and wall seconds to write each collection into a fresh store, with and without the
    triggers (best of `rounds`, taking turns), and how many times the triggers fired."""
    out: dict[str, dict[str, float]] = {}
    for name, source in sources.items():
        docs = corpus.stored_documents(source)
        best = {f"{variant}_{clock}": float("inf") for variant in ("triggers", "none") for clock in ("cpu", "wall")}
        fired = 0
        for _ in range(rounds):
            for variant in ("triggers", "none"):
                with tempfile.TemporaryDirectory(prefix="citebot-bench-cv-") as tmp:
                    target = EmbeddedStore(Path(tmp))
                    if variant == "none":
                        target.close()
                        drop_triggers(Path(tmp))
                        target = EmbeddedStore(Path(tmp))
                    target.open_for(source.stamp())  # type: ignore[arg-type]
                    counter = target._collection_version()
                    cpu, wall = time.process_time(), time.perf_counter()
                    for d in docs:
                        target.replace_document(d.record, d.chunks, d.windows)
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                    best[f"{variant}_cpu"] = min(best[f"{variant}_cpu"], cpu)
                    best[f"{variant}_wall"] = min(best[f"{variant}_wall"], wall)
                    if variant == "triggers":
                        fired = target._collection_version() - counter
                    target.close()
        out[name] = {k: round(v, 3) for k, v in best.items()} | {
            "cpu_ratio": round(best["triggers_cpu"] / best["none_cpu"], 3),
            "wall_ratio": round(best["triggers_wall"] / best["none_wall"], 3),
            "chunks": source.chunk_count(), "fired": fired}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3, help="0: the write path alone (with --writes)")
    parser.add_argument("--every-ms", type=float, default=200.0)
    parser.add_argument("--writes", action="store_true", help="also the triggers' cost on the write path")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writer", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.writer:
        writer(args.writer, args.every_ms)
        return
    embedder = Embedder()
    with tempfile.TemporaryDirectory(prefix="citebot-bench-cv-") as tmp:
        copies = {name: Path(tmp) / name for name in CACHED}
        for name, copy in copies.items():
            if name == "rust" or args.writes:
                copy_store(cached(name), copy)
        source = EmbeddedStore(copies["rust"])
        result: dict[str, Any] = {"chunks": source.chunk_count(), "questions": len(corpus.QUESTIONS),
                                  "every_ms": args.every_ms, "passes": args.passes}
        source.close()
        if args.passes:
            result["keyings"] = beside_a_writer(copies["rust"], embedder, corpus.QUESTIONS, args.passes,
                                                args.every_ms)
        if args.writes:
            stores = {name: EmbeddedStore(copy) for name, copy in copies.items()}
            result["writes"] = write_path(stores, args.rounds)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    if "keyings" in result:
        print(f"rust-doc: {result['chunks']} chunks, {result['questions']} questions x {args.passes} passes; "
              f"a turn every {args.every_ms:g} ms from another process in the writer phase")
        print(f"{'keying':13} {'phase':10} {'p50':>8} {'p95':>8} {'loads':>6} {'postings':>9}")
    for keying, phases in result.get("keyings", {}).items():
        for phase, f in phases.items():
            print(f"{keying:13} {phase:10} {f['p50']:>8.2f} {f['p95']:>8.2f} {f['matrix_loads']:>6} "
                  f"{f['from_postings']:>5}/{f['lexical_reads']}")
        q = phases["quiet"]
        for phase in ("writer", "after_turn"):
            w = phases[phase]
            print(f"{keying:13} {phase}/quiet: p50 {w['p50'] / q['p50']:.2f}, p95 {w['p95'] / q['p95']:.2f}")
    if "keyings" in result:
        old, new = result["keyings"]["data_version"], result["keyings"]["content"]
        for phase in ("writer", "after_turn"):
            print(f"{phase}: data_version over content, p50 {old[phase]['p50'] / new[phase]['p50']:.2f}, "
                  f"p95 {old[phase]['p95'] / new[phase]['p95']:.2f}")
    for name, w in result.get("writes", {}).items():
        print(f"write path, {name} ({w['chunks']} chunks, the triggers fired {w['fired']} times): "
              f"CPU {w['triggers_cpu']:.3f} s with the triggers, {w['none_cpu']:.3f} s without "
              f"({w['cpu_ratio']:.3f}); wall {w['triggers_wall']:.3f} / {w['none_wall']:.3f} s "
              f"({w['wall_ratio']:.3f})")

if __name__ == "__main__":
    main()
