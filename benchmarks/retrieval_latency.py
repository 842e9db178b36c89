"""Retrieval latency per stage, p50 and p95, on both backends and two corpora.

Stages are Retriever.retrieve's timings_ms: analyse (document frequencies, typo fixes,
alias flood checks), embed (the query vector), dense, dense_wait (what the retrieval
waited for those two, run on a worker beside analyse and lexical: search/dense_arm.py, so
total is not their sum), lexical, fuse, rerank (when a reranker is configured) and total. Corpora: examples/ (the 72 labelled questions) and
the Rust books and standard library reference from Debian's rust-doc, 10,000+ chunks
(benchmarks/corpus.py fetches and embeds it once into ~/.cache/citebot/bench/rust-doc; the
first run builds it, about 6 minutes on 2 shared cores). Also prints the share of questions whose top 5 is the same on both backends.
The embedded store is measured as a server has it once the collection is quiet: its lexical
postings built (search/embedded_postings.py).

    eval "$(scripts/services start)"
    .venv/bin/python -m benchmarks.retrieval_latency [--corpus examples|rust|both]
        [--reranker PATH] [--stems-cost] [--json]

--stems-cost measures each backend a second time with the stemmed term groups off
(RetrievalConfig.stemming, search/retrieval_config.py STEM_WEIGHT) and prints what they cost:
the lexical and total p50 with them over without, in the same run.

No reranker weights can be downloaded on this project's machines; with --reranker (a
local sentence-transformers CrossEncoder folder) the rerank stage is measured too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import bot  # noqa: F401 - first: numpy's BLAS threads as in citebot (bot/__init__.py, blas_threads.py)
from benchmarks import corpus
from benchmarks.common import percentile
from ingest.embedder import Embedder
from search.glossary import Glossary
from search.retrieval_config import RetrievalConfig
from search.retrieve import Retriever
from search.store import Store

# Passes over the question set after one warm-up pass (caches, JIT, HNSW pages).
PASSES = {"examples": 2, "rust": 5}
STAGES = ("analyse", "embed", "dense", "dense_wait", "lexical", "fuse", "rerank", "total")


def measure(store: Store, embedder: Embedder, questions: list[str], glossary: Glossary,
            passes: int, reranker=None, stemming: bool = True,
            ) -> tuple[dict[str, dict[str, float]], list[list[str]]]:
    retriever = Retriever(store, embedder.encode_query, glossary,
                          RetrievalConfig(rerank=reranker is not None, stemming=stemming),
                          reranker=reranker)
    tops = [[h.chunk.chunk_id for h in retriever.retrieve(q).hits[:5]] for q in questions]  # warm
    samples: dict[str, list[float]] = {}
    for _ in range(passes):
        for q in questions:
            for stage, ms in retriever.retrieve(q).timings_ms.items():
                samples.setdefault(stage, []).append(ms)
    return stage_figures(samples), tops


def stage_figures(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Each stage's p50, p95 (ms) and sample count."""
    return {stage: {"p50": round(percentile(v, 50), 2), "p95": round(percentile(v, 95), 2), "n": len(v)}
            for stage, v in samples.items()}


def run(name: str, source, questions: list[str], glossary: Glossary,
        embedder: Embedder, reranker=None, stems_cost: bool = False) -> dict[str, Any]:
    source.build_postings()  # a server's steady state: built once the collection is quiet (search/embedded_postings.py)
    source.build_scan()  # and the int8 dense scan, from a matrix's second read (search/embedded_scan.py)
    stores = {"embedded": source, "elasticsearch": corpus.elastic_copy(source, f"citebot-bench-{name}")}
    out: dict[str, Any] = {"corpus": name, "chunks": source.chunk_count(),
                           "questions": len(questions), "backends": {}}
    tops = {}
    for backend, store in stores.items():
        out["backends"][backend], tops[backend] = measure(
            store, embedder, questions, glossary, PASSES[name], reranker)
        if stems_cost:
            out.setdefault("without_stems", {})[backend], _ = measure(
                store, embedder, questions, glossary, PASSES[name], reranker, stemming=False)
    same = sum(set(a) == set(b) for a, b in zip(tops["embedded"], tops["elasticsearch"], strict=True))
    out["top5_parity"] = round(same / len(questions), 3)
    return out


def print_table(result: dict[str, Any]) -> None:
    emb, es = result["backends"]["embedded"], result["backends"]["elasticsearch"]
    print(f"\n{result['corpus']}: {result['chunks']} chunks, {result['questions']} questions; "
          f"same top 5 on both backends: {result['top5_parity']:.3f}")
    print(f"{'stage':9} {'embedded p50':>13} {'p95':>8} {'elastic p50':>12} {'p95':>8} "
          f"{'es/emb p50':>10}")
    for stage in STAGES:
        if stage not in emb or stage not in es:
            continue
        a, b = emb[stage], es[stage]
        ratio = b["p50"] / a["p50"] if a["p50"] else float("nan")
        print(f"{stage:9} {a['p50']:>13.2f} {a['p95']:>8.2f} {b['p50']:>12.2f} {b['p95']:>8.2f} "
              f"{ratio:>10.2f}")
    for backend, without in result.get("without_stems", {}).items():
        with_ = result["backends"][backend]
        print(f"{backend}: with the stemmed groups over without, p50: " + ", ".join(
            f"{stage} {with_[stage]['p50']:.2f}/{without[stage]['p50']:.2f} ms = "
            f"{with_[stage]['p50'] / without[stage]['p50']:.2f}" for stage in ("lexical", "total")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("examples", "rust", "both"), default="both")
    parser.add_argument("--reranker", type=Path, help="local CrossEncoder folder")
    parser.add_argument("--stems-cost", action="store_true",
                        help="also measure without the stemmed term groups, and print the ratio")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = Embedder()
    reranker = None
    if args.reranker:
        from search.rerank import CrossEncoderReranker

        reranker = CrossEncoderReranker(args.reranker)
    results = []
    if args.corpus in ("examples", "both"):
        glossary = Glossary.load(corpus.REPO / "examples" / "glossary.csv")
        results.append(run("examples", corpus.examples_store(embedder),
                           corpus.examples_questions(), glossary, embedder, reranker,
                           args.stems_cost))
    if args.corpus in ("rust", "both"):
        results.append(run("rust", corpus.embedded_store(embedder), corpus.QUESTIONS,
                           Glossary.empty(), embedder, reranker, args.stems_cost))
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            print_table(r)


if __name__ == "__main__":
    main()
