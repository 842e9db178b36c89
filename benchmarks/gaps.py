"""The gaps report (`citebot gaps`, bot/owners/gaps.py): its time on many turns, and the
clustering threshold's sweep on the labelled paraphrase groups.

Time (`--turns N`, default 10,000): N synthetic turns over two weeks in an embedded
store's turn log (the sample handbook ingested with the test embedder, for the chunk ids
the turns cite): a third not answered well (refused, failed check, voted down, weak),
their questions the labelled gap questions of examples/gap-questions.jsonl with a few
words of variation each (so most are distinct), the rest answered, citing stored
chunks, a tenth of them chunks that have since changed. The report for the last 7 days
is built and its stages timed: reading the turn log, encoding the questions whose turn
recorded no vector (none here; all of them with --unrecorded, as for turns logged before
the vector was recorded), clustering, the rest (nearest documents, stale citations).
Each flagged turn carries its question's vector as the answer path records it (the
vector retrieval searched with): the labelled question's, encoded once with the real
model, plus a little noise per variation. Goal: under 5 s.

Sweep (`--sweep`): the labelled questions encoded with the real model and clustered at
each threshold; prints purity (groups and strays as labels), topics, and into how many
topics each paraphrase group was split.

    .venv/bin/python -m benchmarks.gaps --turns 10000 [--unrecorded]
    .venv/bin/python -m benchmarks.gaps --sweep
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bot  # noqa: F401 - first: numpy's BLAS threads as in citebot (bot/__init__.py)
from bot.answer.record import pack_vector
from bot.owners import gaps as gaps_module
from bot.owners.cluster import cluster, purity
from bot.testing.bench import ingest_handbook
from bot.testing.gaps_month import labelled
from ingest.embedder import Embedder
from search.embedded import EmbeddedStore

THRESHOLDS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75)
VARIATIONS = ("", " please", " for contractors", " in the Harrowgate office", " this year",
              " for part-time staff", " after probation", " in Germany", " for new starters",
              " at the annex", " for managers", " next quarter")
OUTCOME_SHARE = 1 / 3


def synthetic_turns(store: EmbeddedStore, n: int, now: datetime, base, recorded: bool = True,
                    seed: int = 7) -> None:
    """`base`: the labelled questions' vectors; a variation's vector is its question's with
    a little noise (as recorded when it was searched: TurnRecord.question_vector)."""
    import numpy as np

    rng = random.Random(seed)
    noise = np.random.default_rng(seed)
    chunks = store.iter_chunks()
    questions = [q for _, q in labelled()]
    for i in range(n):
        at = (now - timedelta(seconds=rng.uniform(0, 14 * 86400))).isoformat()
        cited = rng.sample(chunks, 3)
        record = {
            "turn_id": f"t-bench{i:07d}", "created_at": at, "user": f"U{rng.randrange(200):05d}",
            "channel": f"C{rng.randrange(12):04d}", "surface": "slack", "composer": "extractive",
            "candidates": [{"chunk_id": c.chunk_id, "source": c.source} for c in cited],
            "support": {"addressed": False, "best_coverage": 0.8, "dense_z": 2.0},
        }
        if rng.random() < OUTCOME_SHARE:
            pick = rng.randrange(len(questions))
            record["question"] = questions[pick] + rng.choice(VARIATIONS) + f" ({rng.randrange(40)})"
            record["refused"] = True
            if recorded:
                v = base[pick] + noise.normal(0, 0.02, base.shape[1])
                record["question_vector"] = pack_vector(v / np.linalg.norm(v))
        else:
            record["question"] = f"answered question {i}"
            record["passages"] = [{"number": 1, "chunk_id": c.chunk_id, "source": c.source,
                                   "heading_path": list(c.heading_path),
                                   "text_hash": "0" * 20 if rng.random() < 0.1 else None}
                                  for c in cited[:1]]
            record["citations"] = [{"marker": "[1]", "chunk_id": (cited[0].chunk_id if rng.random() > 0.1
                                                                  else "gone" + cited[0].chunk_id[4:]),
                                    "source": cited[0].source, "resolved": True, "retrieved": True}]
        store.put_turn(record["turn_id"], at, record)


def time_report(n: int, recorded: bool = True) -> dict:
    now = datetime.now(UTC)
    embedder = Embedder()
    base = embedder.encode_texts([q for _, q in labelled()])
    with tempfile.TemporaryDirectory() as tmp:
        ingest_handbook(Path(tmp) / "store")
        store = EmbeddedStore(Path(tmp) / "store")
        synthetic_turns(store, n, now, base, recorded)
        stages: dict[str, float] = {}
        original = gaps_module.cluster

        def timed_encode(texts):
            t = time.perf_counter()
            out = embedder.encode_texts(texts)
            stages["encode"] = time.perf_counter() - t
            stages["questions"] = len(texts)
            return out

        def timed_cluster(matrix, threshold):
            t = time.perf_counter()
            out = original(matrix, threshold)
            stages["cluster"] = time.perf_counter() - t
            return out

        gaps_module.cluster = timed_cluster  # type: ignore[assignment]
        try:
            t = time.perf_counter()
            read = list(store.turns_since((now - timedelta(days=14)).isoformat()))
            stages["read"] = time.perf_counter() - t
            t = time.perf_counter()
            report = gaps_module.build_report(store, store, timed_encode, period=timedelta(days=7), now=now,
                                              dims=embedder.stamp.dims)
            total = time.perf_counter() - t
        finally:
            gaps_module.cluster = original
        store.close()
    return {"turns": n, "read_turns": len(read), "encoded_questions": stages.get("questions", 0),
            "total_s": round(total, 2), "read_s": round(stages["read"], 2),
            "encode_s": round(stages.get("encode", 0.0), 2), "cluster_s": round(stages.get("cluster", 0.0), 2),
            "topics": len(report["topics"]), "stale": len(report["stale"])}


def sweep() -> list[dict]:
    rows = labelled()
    vectors = Embedder().encode_texts([q for _, q in rows])
    truth = [g if g != "stray" else f"stray:{i}" for i, (g, _) in enumerate(rows)]
    groups = sorted({g for g, _ in rows} - {"stray"})
    out = []
    for threshold in THRESHOLDS:
        labels = cluster(vectors, threshold)
        split = {g: len({int(labels[i]) for i, (gg, _) in enumerate(rows) if gg == g}) for g in groups}
        out.append({"threshold": threshold, "purity": round(purity(labels, truth), 3),
                    "topics": int(labels.max()) + 1, "split": split})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10000)
    parser.add_argument("--sweep", action="store_true", help="The threshold sweep instead of the timing.")
    parser.add_argument("--unrecorded", action="store_true",
                        help="Turns without their question's vector (as logged before it was recorded): all encoded.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.sweep:
        rows = sweep()
        if args.json:
            print(json.dumps(rows))
            return
        print(f"{'threshold':>9} {'purity':>7} {'topics':>7}  groups split into")
        for r in rows:
            print(f"{r['threshold']:>9.2f} {r['purity']:>7.3f} {r['topics']:>7}  "
                  + ", ".join(f"{g} {k}" for g, k in r["split"].items()))
        return
    result = time_report(args.turns, recorded=not args.unrecorded)
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:>20}  {value}")


if __name__ == "__main__":
    main()
