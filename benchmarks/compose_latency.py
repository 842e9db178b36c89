"""How long the extractive composer takes per turn, on the passages real questions get.

For every answerable question of a labelled set, this retrieves and selects passages once
(as a turn does), then times ExtractiveComposer.compose on them, three ways:

- shortlist (the default): words scored for every sentence, the best SHORTLIST embedded;
- every sentence embedded (what compose did before: 700-1,100 ms a turn);
- words only (no embedding at all: the floor).

It prints p50 and p90 per way, and the load average, because on a shared machine the
figures are the machine's as much as the code's.

    CITEBOT_STORE=~/.cache/citebot/quality/examples-store CITEBOT_GLOSSARY=examples/glossary.csv \\
        .venv/bin/python -m benchmarks.compose_latency examples/questions.jsonl [--limit 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from bot.answer.compose import SHORTLIST, ExtractiveComposer
from bot.answer.turn import Answerer, new_record
from bot.evaluate import MemoryTurnLog, load_items
from bot.memory.state import InProcessState
from bot.settings import load_settings
from bot.wiring import Components

EVERY_SENTENCE = 10**6  # a shortlist no passage set reaches


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--limit", type=int, default=0, help="at most this many questions (0: all)")
    args = ap.parse_args()
    c = Components(load_settings())
    retriever = c.retriever()
    # Passages exactly as a turn gives them (Answerer.retrieve, .passages: widening, windows),
    # for the default extractive composer whatever the environment configures.
    answerer = Answerer(retriever, ExtractiveComposer(c.embedder.encode_texts), MemoryTurnLog(),
                        InProcessState(), passages=c.settings.passages)
    items = [i for i in load_items(args.questions) if i.answerable]
    if args.limit:
        items = items[: args.limit]
    inputs = []
    times = []  # the store read that gives the passages their window scores, apart
    for item in items:
        r = answerer.retrieve(item.question)
        if not r.hits:
            continue
        record = new_record(item.question)
        passages = answerer.passages(record, r)
        if record.errors:  # a window read the store refused: say so, never time without it
            raise SystemExit(f"{item.id}: {record.errors[0]}")
        times.append(record.timings_ms["windows"])
        inputs.append((item.question, passages, r.expansions))
    c.embedder.encode_texts(["warm up the model"])  # its first call pays one-off set-up
    ways = {"shortlist": ExtractiveComposer(c.embedder.encode_texts, shortlist=SHORTLIST),
            "every sentence": ExtractiveComposer(c.embedder.encode_texts, shortlist=EVERY_SENTENCE),
            "words only": ExtractiveComposer(None)}
    load_before = os.getloadavg()[0]
    print(f"{len(inputs)} questions; load average {load_before:.1f} on {os.cpu_count()} cores")
    p50, p90 = np.percentile(times, [50, 90])
    print(f"{'window scores':16} p50 {p50:7.1f} ms   p90 {p90:7.1f} ms")
    for name, composer in ways.items():
        times = []
        for question, passages, expansions in inputs:
            t = time.perf_counter()
            composer.compose(question, passages, [], expansions)
            times.append((time.perf_counter() - t) * 1000)
        p50, p90 = np.percentile(times, [50, 90])
        print(f"{name:16} p50 {p50:7.1f} ms   p90 {p90:7.1f} ms")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
