"""Whole turns on the embedded store with numpy's BLAS on every core, and on one.

numpy's OpenBLAS starts a thread per core for a large matrix product (the embedded
store's dense scan of a 10,000-chunk collection is one) and keeps those threads spinning
for a while after it; the model's own threads then share the cores with them. bot/__init__.py
therefore sets OPENBLAS_NUM_THREADS=1 unless it is set already. This measures what that
costs and saves: each configuration runs in a fresh process (the variable is read once,
when numpy loads), the two interleaved, each doing what a turn does on the embedded
store (the Answerer's whole turn: retrieve, gate, passages and their window scores, compose,
checks), after one warm-up pass.

    .venv/bin/python -m benchmarks.blas_threads [--corpus rust|examples] [--runs 3] [--json]

rust: the 10,000-chunk rust-doc store of benchmarks/corpus.py (`python -m benchmarks.corpus --build` first);
examples: the sample handbook (built by corpus.py too). Prints per configuration the p50
of each stage in ms, then one thread over every core for turn, compose and dense.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from benchmarks.common import REPO

PASSES = 3  # after the warm-up pass
STAGES = ("embed", "dense", "lexical", "total", "compose", "turn")
# Where each stage's time is in a turn record's timings_ms ("total" is retrieval's).
STAGE_KEYS = {"embed": "retrieve_embed", "dense": "retrieve_dense", "lexical": "retrieve_lexical",
              "total": "retrieve_total", "compose": "compose", "turn": "total"}


def child(corpus_name: str) -> dict:
    import numpy as np

    from benchmarks import corpus
    from bot.evaluate import MemoryTurnLog
    from bot.settings import load_settings
    from bot.wiring import Components

    # The turns are citebot's own, through the Answerer the command line builds, on the
    # store corpus.py builds (or checks) once, without a glossary.
    os.environ["CITEBOT_STORE"] = str(corpus.CACHE / ("embedded" if corpus_name == "rust" else "examples-embedded"))
    for name in ("CITEBOT_ES_URL", "CITEBOT_GLOSSARY", "ANTHROPIC_API_KEY"):
        os.environ.pop(name, None)
    c = Components(load_settings())
    if corpus_name == "rust":
        corpus.embedded_store(c.embedder).close()
        questions = corpus.QUESTIONS
    else:
        corpus.examples_store(c.embedder).close()
        questions = corpus.examples_questions()
    answerer = c.make_answerer(c.retriever(), MemoryTurnLog())
    times: dict[str, list[float]] = {s: [] for s in STAGES}
    for n in range(PASSES + 1):
        for q in questions:
            record = answerer.ask(q)
            if record.error:
                raise SystemExit(f"{q!r}: {record.error}")
            if n == 0:
                continue
            for stage, key in STAGE_KEYS.items():
                if key in record.timings_ms:  # compose: not for a question the gate refused
                    times[stage].append(record.timings_ms[key])
    return {"threads": os.environ.get("OPENBLAS_NUM_THREADS"), "questions": len(questions),
            "p50_ms": {s: round(float(np.percentile(v, 50)), 2) for s, v in times.items()},
            "load": round(os.getloadavg()[0], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", choices=("rust", "examples"), default="rust")
    ap.add_argument("--runs", type=int, default=3, help="runs of each configuration, interleaved")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.corpus)))
        return 0
    cores = str(os.cpu_count() or 1)
    rows = []
    for _ in range(args.runs):
        for threads in (cores, "1"):
            env = {**os.environ, "OPENBLAS_NUM_THREADS": threads}
            r = subprocess.run([sys.executable, "-m", "benchmarks.blas_threads", "--child", "--corpus", args.corpus],
                               cwd=REPO, env=env, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                print(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "child failed", file=sys.stderr)
                return 1
            rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    med = {}
    for threads in (cores, "1"):
        runs = [row["p50_ms"] for row in rows if row["threads"] == threads]
        med[threads] = {s: sorted(x[s] for x in runs)[len(runs) // 2] for s in STAGES}
    ratios = {s: round(med["1"][s] / med[cores][s], 3) if med[cores][s] else None
              for s in ("turn", "compose", "dense")}
    if args.json:
        print(json.dumps({"corpus": args.corpus, "cores": int(cores), "runs": rows, "one_over_all": ratios}))
        return 0
    print(f"{args.corpus}: {rows[0]['questions']} questions x {PASSES} passes, p50 ms per stage")
    print(f"{'threads':>8} " + " ".join(f"{s:>8}" for s in STAGES) + "    load")
    for row in rows:
        print(f"{row['threads']:>8} " + " ".join(f"{row['p50_ms'][s]:>8.2f}" for s in STAGES) + f"  {row['load']:>6}")
    print("one thread / every core (median of runs): "
          + ", ".join(f"{s} {v}" for s, v in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
