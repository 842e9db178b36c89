"""The embedded store's lexical term groups: FTS5's bm25() against the same BM25 over the
postings citebot keeps in memory (search/embedded_postings.py), on the rust-doc corpus
(benchmarks/corpus.py, 10,000+ chunks).

FTS5 scores every row a group's words match before it keeps the best 100
(search/embedded_lexical.py LEXICAL_GROUP_LIMIT), so a group of common words costs
milliseconds on a large collection. This builds each FTS5 table's postings once, as a
server does once the collection is quiet, and scores each group the rust-doc questions
make (Retriever's analysis and term groups, the stemmed ones too) both ways: p50 and p95 ms,
whether the best 100 come in the same order, the largest score difference, and the
build's seconds and the postings' size (docs/decisions/0058-lexical-postings-in-memory.md).

    .venv/bin/python -m benchmarks.lexical_memory [--passes 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import bot  # noqa: F401 - first: numpy's BLAS threads as in citebot
from benchmarks import corpus
from benchmarks.common import percentile
from ingest.embedder import Embedder
from search.embedded_lexical import HEADING_WEIGHT, LEXICAL_GROUP_LIMIT
from search.embedded_postings import TablePostings
from search.glossary import Glossary
from search.retrieval_config import RetrievalConfig
from search.retrieve import Retriever
from search.text import query_stems


def groups_of(retriever: Retriever, question: str) -> list[tuple[str, list[str]]]:
    """The (table, words) of each lexical group the retrieval would search; a stemmed term
    that is a phrase (several stems) is left out, as the in-memory scorer has no positions."""
    asked = retriever._analyse(question, None)
    out = []
    for g in retriever._term_groups(asked)[0]:
        if g.stemmed:
            stems = [query_stems(t) for t in g.terms]
            out.append(("chunks_stems", [s[0] for s in stems if len(s) == 1]))
        else:
            out.append(("chunks_fts", list(g.terms)))
    return [(t, w) for t, w in out if w]


def measure(passes: int = 5) -> dict:
    embedder = Embedder()
    store = corpus.embedded_store(embedder)
    tables, built = {}, {}
    for t in ("chunks_fts", "chunks_stems"):
        rows = store._db.execute(f"SELECT id, c0, c1 FROM {t}_content").fetchall()
        started = time.perf_counter()
        tables[t] = TablePostings(rows, HEADING_WEIGHT)
        built[t] = time.perf_counter() - started
    retriever = Retriever(store, embedder.encode_query, Glossary.empty(), RetrievalConfig())
    groups = [g for q in corpus.QUESTIONS for g in groups_of(retriever, q)]
    fts_ms: list[float] = []
    mem_ms: list[float] = []
    same, worst = 0, 0.0
    for _ in range(passes):
        for table, terms in groups:
            expression = " OR ".join(f'"{t}"' for t in terms)
            t = time.perf_counter()
            theirs = store._match(expression, LEXICAL_GROUP_LIMIT, None, table)
            fts_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            ours = tables[table].top(terms, LEXICAL_GROUP_LIMIT)
            mem_ms.append((time.perf_counter() - t) * 1000)
            same += [r for r, _ in theirs] == [r for r, _ in ours]
            worst = max([worst] + [abs(a[1] - b[1]) for a, b in zip(theirs, ours, strict=False)])
    return {
        "chunks": store.chunk_count(),
        "groups": len(groups),
        "fts5_p50_ms": round(percentile(fts_ms, 50), 3),
        "fts5_p95_ms": round(percentile(fts_ms, 95), 3),
        "memory_p50_ms": round(percentile(mem_ms, 50), 3),
        "memory_p95_ms": round(percentile(mem_ms, 95), 3),
        "same_order_share": round(same / len(fts_ms), 3),
        "largest_score_difference": worst,
        "tables": {name: {"rows": p.rows, "words": len(p.words), "postings": sum(len(r) for r, _ in p.words.values()),
                          "build_s": round(built[name], 2),
                          "mbytes": round((sum(r.nbytes + f.nbytes for r, f in p.words.values()) + 2 * p.length.nbytes)
                                          / 1e6, 1)}
                   for name, p in tables.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.passes)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"rust-doc: {result['chunks']} chunks, {result['groups']} term groups of {len(corpus.QUESTIONS)} questions")
    print(f"  FTS5 bm25():  p50 {result['fts5_p50_ms']:.3f} ms, p95 {result['fts5_p95_ms']:.3f}")
    print(f"  in memory:    p50 {result['memory_p50_ms']:.3f} ms, p95 {result['memory_p95_ms']:.3f} "
          f"({result['fts5_p50_ms'] / result['memory_p50_ms']:.1f}x at p50)")
    print(f"  same best {LEXICAL_GROUP_LIMIT} in the same order: {result['same_order_share']:.3f}; "
          f"largest score difference {result['largest_score_difference']:.2e}")
    for name, t in result["tables"].items():
        print(f"  {name}: {t['rows']} rows, {t['words']} words, {t['postings']} postings, "
              f"built in {t['build_s']:.2f} s, {t['mbytes']:.1f} MB")


if __name__ == "__main__":
    main()
