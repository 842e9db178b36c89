"""What an embedding model costs at query time and on disk, two models side by side.

For each (store, model) pair: the store's size on disk and its windows, and retrieval's
p50 and p95 per stage (Retriever.retrieve's timings_ms: embed, dense, lexical, fuse,
total) over a labelled collection's questions, hybrid mode, one warm-up pass, then
--passes passes with the models interleaved question by question (a burst of load on the
shared machine lands on both alike). The stores are ones benchmarks.quality built, e.g.
the bundled model's and all-mpnet-base-v2's (--model) of the same collection
(docs/decisions/0038-mpnet-second-model.md):

    .venv/bin/python -m benchmarks.model_cost --collection civicactions-handbook \\
        --stores ~/.cache/citebot/quality/civicactions-handbook-store,\\
~/.cache/citebot/quality/civicactions-handbook-all-mpnet-base-v2-store \\
        --models bundled,~/.cache/citebot/models/all-mpnet-base-v2 [--passes 2] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import bot  # noqa: F401 - first: numpy's BLAS threads as in citebot (bot/__init__.py)
from benchmarks.common import percentile
from benchmarks.quality import targets

STAGES = ("embed", "dense", "lexical", "fuse", "total")


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    from ingest.embedder import Embedder
    from search.embedded import EmbeddedStore
    from search.glossary import Glossary
    from search.retrieval_config import RetrievalConfig
    from search.retrieve import Retriever

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collection", required=True, help="a labelled collection (benchmarks/collections/)")
    parser.add_argument("--stores", required=True, help="comma-separated embedded store folders")
    parser.add_argument("--models", required=True, help="comma-separated model folders, 'bundled' for the default")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    stores = [Path(s).expanduser() for s in args.stores.split(",")]
    models = [None if m == "bundled" else Path(m).expanduser() for m in args.models.split(",")]
    if len(stores) != len(models):
        parser.error("--stores and --models need as many entries each")
    (target,) = targets([args.collection])
    glossary = Glossary.load(target.glossary) if target.glossary else Glossary.empty()
    questions = [json.loads(line)["question"] for line in target.questions.read_text().splitlines() if line.strip()]
    runs = []
    for store_dir, model in zip(stores, models, strict=True):
        embedder = Embedder(model)
        store = EmbeddedStore(store_dir)
        store.open_for(embedder.stamp)  # refuses a store of the other model
        windows = store._db.execute("SELECT COUNT(*) FROM windows").fetchone()[0]
        retriever = Retriever(store, embedder.encode_query, glossary, RetrievalConfig())
        runs.append({"model": embedder.stamp.name, "dims": embedder.stamp.dims, "store": str(store_dir),
                     "disk_bytes": disk_bytes(store_dir), "windows": windows, "retriever": retriever,
                     "samples": {}})
    for q in questions:  # warm-up
        for r in runs:
            r["retriever"].retrieve(q, mode="hybrid")
    for _ in range(args.passes):
        for q in questions:
            for r in runs:
                for stage, ms in r["retriever"].retrieve(q, mode="hybrid").timings_ms.items():
                    r["samples"].setdefault(stage, []).append(ms)
    out = []
    for r in runs:
        stages = {s: {"p50": round(percentile(v, 50), 2), "p95": round(percentile(v, 95), 2)}
                  for s, v in r["samples"].items() if s in STAGES}
        out.append({k: r[k] for k in ("model", "dims", "store", "disk_bytes", "windows")}
                   | {"questions": len(questions), "passes": args.passes, "stages": stages})
    if args.json:
        print(json.dumps(out))
        return 0
    for row in out:
        print(f"{row['model']} ({row['dims']} dims): store {row['disk_bytes'] / 1e6:.1f} MB, "
              f"{row['windows']} windows; {row['questions']} questions x {row['passes']} passes, hybrid")
        print("  " + ", ".join(f"{s} p50 {v['p50']} / p95 {v['p95']} ms" for s, v in row["stages"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
