"""The quality table: Recall@1/5, MRR and refusal accuracy per configuration and split,
with paired-bootstrap 95% intervals for the comparisons that matter.

Uses the configured store (CITEBOT_STORE, or Elasticsearch with CITEBOT_ES_URL) and
glossary (CITEBOT_GLOSSARY), already ingested:

    export CITEBOT_STORE=/tmp/s CITEBOT_GLOSSARY=examples/glossary.csv
    .venv/bin/citebot ingest examples/handbook
    .venv/bin/python -m benchmarks.eval_table examples/questions.jsonl

+rerank needs CITEBOT_RERANKER (a local CrossEncoder folder); none can be downloaded on
this project's machines, so without it that row says so instead of printing figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bot.answer.gate import Gate
from bot.evaluate import compare, figures, load_items, parse_config, run_item
from bot.settings import load_settings
from bot.wiring import Components

CONFIGS = ["dense", "lexical", "hybrid-aliases", "hybrid", "hybrid+rerank"]
COMPARISONS = [("lexical", "hybrid"), ("dense", "hybrid"), ("hybrid-aliases", "hybrid")]


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/questions.jsonl")
    settings = load_settings()
    c = Components(settings)
    base = c.retrieval_config()
    backend = "elasticsearch" if settings.es_url else "embedded"
    gate = Gate()
    for split in ("dev", "heldout"):
        items = load_items(path, split)
        runs = {}
        print(f"\n{backend}, {split} ({len(items)} questions, "
              f"{sum(i.answerable for i in items)} answerable)")
        print(f"{'configuration':18}{'R@1':>7}{'R@5':>7}{'MRR':>7}{'refusal':>9}")
        for spec in CONFIGS:
            _, cfg = parse_config(spec, base)
            if cfg.rerank and c.reranker is None:
                print(f"{spec:18}  not measured: no reranker weights here (set CITEBOT_RERANKER)")
                continue
            retriever = c.retriever(cfg)  # once per configuration: its caches carry over
            runs[spec] = [run_item(i, retriever, gate) for i in items]
            f = figures(runs[spec])
            print(f"{spec:18}{f.r1:>7.3f}{f.r5:>7.3f}{f.mrr:>7.3f}{f.refusal_accuracy:>9.3f}")
        for a, b in COMPARISONS:
            result = compare(runs[a], runs[b])
            cells = "  ".join(f"{m} {v['diff']:+.3f} [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]"
                              for m, v in result.items() if m != "refusal_accuracy")
            print(f"{b} - {a}: {cells}")


if __name__ == "__main__":
    main()
