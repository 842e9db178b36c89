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

Sweep (`--sweep`): the labelled questions encoded with the real model (`--model DIR`:
another model folder, e.g. all-mpnet-base-v2) and clustered at each threshold; prints
purity (groups and strays as labels), topics, into how many topics each paraphrase group
was split, and the cosines the threshold has to separate: the lowest between two
questions of one group and the highest between questions of different labels.

Month (`--month`): the month the weak-evidence rule (bot/owners/outcome.py) was observed
on: every gap question asked twice, the strays once, 12 answerable questions, the whole
sample handbook ingested with the model (`--model DIR`), the extractive composer and the
model's own gate. Prints, for the paraphrased gap turns and the answerable ones, how many
the gate refused, labelled "closest" or let through, and of those let through how many
are weak at each edge on `dense_z` (`--weak-z`; today's rule: WEAK_Z_MAX).

    .venv/bin/python -m benchmarks.gaps --turns 10000 [--unrecorded]
    .venv/bin/python -m benchmarks.gaps --month [--model DIR] [--weak-z 1.0,1.5]
    .venv/bin/python -m benchmarks.gaps --sweep [--model DIR] [--thresholds 0.3:0.7:0.01] [--orders 200]
        [--collections django,git,...]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
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

THRESHOLDS = (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75)
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


def parse_thresholds(text: str) -> tuple[float, ...]:
    """ "0.3,0.45" or "LOW:HIGH:STEP" (both ends included)."""
    if ":" in text:
        low, high, step = (float(p) for p in text.split(":"))
        return tuple(round(low + i * step, 4) for i in range(round((high - low) / step) + 1))
    return tuple(float(p) for p in text.split(","))


def _exact(labels, truth: list[str]) -> bool:
    """The topics are exactly the labels: each group one topic of its own, each stray alone."""
    return len(set(zip(labels.tolist(), truth, strict=True))) == len(set(truth)) == int(labels.max()) + 1


def distinct_questions(collections: list[str]) -> list[list[str]]:
    """Each labelled collection's questions (benchmarks/collections/NAME/questions.jsonl):
    no two ask the same fact, so any two in one topic are a merge."""
    out = []
    for name in collections:
        path = Path(__file__).resolve().parent / "collections" / name / "questions.jsonl"
        out.append([json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()])
    return out


def sweep(model: Path | None = None, thresholds: tuple[float, ...] = THRESHOLDS, orders: int = 0,
          collections: list[str] | None = None) -> list[dict]:
    """`orders`: also cluster the questions in this many shuffled orders (the leader pass
    depends on the order) and count those giving exactly the labelled topics.
    `collections`: also cluster each labelled collection's questions, one fact each, and
    count the questions that share a topic with another."""
    import numpy as np

    rows = labelled()
    embedder = Embedder(model)
    vectors = embedder.encode_texts([q for _, q in rows])
    truth = [g if g != "stray" else f"stray:{i}" for i, (g, _) in enumerate(rows)]
    groups = sorted({g for g, _ in rows} - {"stray"})
    x = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = x @ x.T
    same = np.array([[a == b for b in truth] for a in truth])
    off = ~np.eye(len(truth), dtype=bool)
    print(f"model {embedder.stamp.name}: cosine within a group min {sims[same & off].min():.3f} "
          f"(mean {sims[same & off].mean():.3f}); across labels max {sims[~same].max():.3f} "
          f"(mean {sims[~same].mean():.3f})", file=sys.stderr)
    perms = [np.random.default_rng(seed).permutation(len(rows)) for seed in range(orders)]
    facts = [embedder.encode_texts(qs) for qs in distinct_questions(collections or [])]
    out = []
    for threshold in thresholds:
        labels = cluster(vectors, threshold)
        split = {g: len({int(labels[i]) for i, (gg, _) in enumerate(rows) if gg == g}) for g in groups}
        exact = sum(_exact(cluster(vectors[p], threshold), [truth[i] for i in p]) for p in perms)
        merged = 0
        for f in facts:
            sizes = np.bincount(cluster(f, threshold))
            merged += int(sizes[sizes > 1].sum())
        out.append({"threshold": threshold, "purity": round(purity(labels, truth), 3),
                    "topics": int(labels.max()) + 1, "split": split, "exact_orders": exact,
                    "facts_merged": merged, "facts": sum(len(f) for f in facts)})
    return out


def month(model: Path | None = None, weak_z: tuple[float, ...] = (1.0,)) -> dict:
    from bot.answer.compose import ExtractiveComposer
    from bot.answer.gate import Gate
    from bot.answer.turn import Answerer
    from bot.memory.state import InProcessState
    from bot.owners.outcome import WEAK_BEST_COVERAGE_MAX, outcome_of
    from bot.testing.gaps_month import answerable, ask_month, plan
    from search.glossary import Glossary
    from search.retrieve import Retriever

    embedder = Embedder(model)
    gate = Gate.for_model(embedder.stamp.name)
    with tempfile.TemporaryDirectory() as tmp:
        ingest_handbook(Path(tmp) / "store", embedder)
        store = EmbeddedStore(Path(tmp) / "store")
        answerer = Answerer(Retriever(store, embedder.encode_query, Glossary.empty()),
                            ExtractiveComposer(embedder.encode_texts), store, InProcessState(), gate=gate)
        asked = ask_month(answerer, plan(again=6, extra=answerable(12)))
        records = [(a.group, store.get_turn(a.turn_id)) for a in asked]
        store.close()
    out: dict = {"model": embedder.stamp.name, "gate_z_max": gate.z_max}
    for kind, wanted in (("gap", lambda g: g not in ("stray", "answerable")), ("stray", lambda g: g == "stray"),
                         ("answerable", lambda g: g == "answerable")):
        rows = [r for g, r in records if wanted(g)]
        through = [r for r in rows if r.get("outcome") == "answer"]
        row = {"turns": len(rows), "refused": sum(r.get("outcome") == "refused" for r in rows),
               "closest": sum(r.get("outcome") == "closest" for r in rows), "let_through": len(through),
               "flagged_today": sum(outcome_of(r) is not None for r in rows)}
        for edge in weak_z:
            row[f"weak_z<{edge}"] = sum(
                1 for r in through
                if r.get("composer") == "extractive" and not (s := r.get("support") or {}).get("addressed")
                and float(s.get("best_coverage") or 0.0) < WEAK_BEST_COVERAGE_MAX
                and s.get("dense_z") is not None and float(s["dense_z"]) < edge)
        row["dense_z_let_through"] = sorted(round(float((r.get("support") or {}).get("dense_z") or 0.0), 2)
                                            for r in through)
        out[kind] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10000)
    parser.add_argument("--sweep", action="store_true", help="The threshold sweep instead of the timing.")
    parser.add_argument("--unrecorded", action="store_true",
                        help="Turns without their question's vector (as logged before it was recorded): all encoded.")
    parser.add_argument("--model", type=Path, help="--sweep, --month with this model folder; default: bundled")
    parser.add_argument("--thresholds", type=parse_thresholds, default=THRESHOLDS,
                        help='--sweep at these thresholds: "0.3,0.45" or "LOW:HIGH:STEP"')
    parser.add_argument("--orders", type=int, default=0,
                        help="--sweep also in this many shuffled orders: how many give exactly the labelled topics")
    parser.add_argument("--collections", help="--sweep also on these labelled collections' questions (one fact "
                        "each): how many share a topic with another")
    parser.add_argument("--month", action="store_true", help="The weak-evidence rule on the month's turns.")
    parser.add_argument("--weak-z", type=parse_thresholds, default=(1.0,),
                        help='--month: the dense_z edges of "weak" to count: "1.0,1.5" or "LOW:HIGH:STEP"')
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = args.model.expanduser().resolve() if args.model else None
    if args.month:
        print(json.dumps(month(model, args.weak_z), indent=None if args.json else 1))
        return
    if args.sweep:
        rows = sweep(model, args.thresholds, args.orders,
                     args.collections.split(",") if args.collections else None)
        if args.json:
            print(json.dumps(rows))
            return
        print(f"{'threshold':>9} {'purity':>7} {'topics':>7} {'exact orders':>12} {'facts merged':>12}  "
              "groups split into")
        for r in rows:
            exact = f"{r['exact_orders']}/{args.orders}" if args.orders else "-"
            merged = f"{r['facts_merged']}/{r['facts']}" if r["facts"] else "-"
            print(f"{r['threshold']:>9.2f} {r['purity']:>7.3f} {r['topics']:>7} {exact:>12} {merged:>12}  "
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
