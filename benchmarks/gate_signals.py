"""The refusal gate's signals, per question, on the evaluation collections: how well each
separates answerable from unanswerable questions, and what a few candidate rules refuse.

    python benchmarks/gate_signals.py [--collections examples,git,haproxy] [--json]

Reads the embedded stores that benchmarks/quality.py builds (run it first); retrieval is
hybrid with each collection's glossary, exactly as `citebot eval` runs it. Tune on the
tuned collections only: a held-out collection belongs in this table once, at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.answer.gate import Gate  # noqa: E402
from bot.evaluate import load_items  # noqa: E402
from ingest.embedder import Embedder  # noqa: E402
from search.embedded import EmbeddedStore  # noqa: E402
from search.glossary import Glossary  # noqa: E402
from search.retrieve import Retriever  # noqa: E402

_spec = importlib.util.spec_from_file_location("citebot_quality", REPO / "benchmarks" / "quality.py")
quality = importlib.util.module_from_spec(_spec)
sys.modules["citebot_quality"] = quality  # dataclasses look their module up
_spec.loader.exec_module(quality)  # type: ignore[union-attr]

SIGNALS = ("dense_top", "dense_z", "coverage", "best_coverage")
RULES = {
    "the earlier rule": None,  # reproduced below from its constants
    "dense_z < 0": lambda s: s["dense_z"] is not None and s["dense_z"] < 0,
    "gate (dense_z < 0 and best_coverage < 0.35)": "gate",
    "dense_z < 0.5 and best_coverage < 0.5": lambda s: s["dense_z"] is not None and s["dense_z"] < 0.5
    and s["best_coverage"] < 0.5,
}


def earlier_rule(s: dict) -> bool:
    """The gate before this one (examples-fitted): a missing word, or nothing close."""
    if s["missing"] and s["dense_top"] < 0.72 and s["coverage"] < 0.80:
        return True
    return s["dense_top"] < 0.30 and s["coverage"] < 0.50


def auc(pos: list[float], neg: list[float]) -> float:
    if not pos or not neg:
        return float("nan")
    return sum((p > q) + 0.5 * (p == q) for p in pos for q in neg) / (len(pos) * len(neg))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", default="examples,git,haproxy,sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = Embedder()
    gate = Gate()
    report: dict[str, dict] = {}
    for target in quality.targets(args.collections.split(",")):
        store_dir = quality.QUALITY_CACHE / f"{target.name}-store"
        if not store_dir.exists():
            print(f"{target.name}: no store at {store_dir}: run benchmarks/quality.py first",
                  file=sys.stderr)
            continue
        store = EmbeddedStore(store_dir)
        store.open_for(embedder.stamp)
        glossary = Glossary.load(target.glossary) if target.glossary else Glossary.empty()
        retriever = Retriever(store, embedder.encode_query, glossary)
        rows = []
        for item in load_items(target.questions):
            s = retriever.retrieve(item.question).support
            row = {"id": item.id, "answerable": item.answerable, "addressed": s.addressed,
                   "dense_top": s.dense_top, "dense_z": s.dense_z, "coverage": s.coverage,
                   "best_coverage": s.best_coverage, "missing": s.missing,
                   "gate": gate.refuse(s) is not None}
            rows.append(row)
        free = [r for r in rows if not r["addressed"]]
        entry: dict = {"auc": {}, "rules": {}, "heldout": target.heldout}
        for sig in SIGNALS:
            pos = [r[sig] for r in free if r["answerable"] and r[sig] is not None]
            neg = [r[sig] for r in free if not r["answerable"] and r[sig] is not None]
            entry["auc"][sig] = round(auc(pos, neg), 3)
        answerable = [r for r in rows if r["answerable"]]
        unanswerable = [r for r in rows if not r["answerable"]]
        for name, rule in RULES.items():
            def refuses(r: dict, rule=rule) -> bool:
                if rule == "gate":
                    return r["gate"]
                if r["addressed"]:
                    return False
                return earlier_rule(r) if rule is None else rule(r)
            entry["rules"][name] = {
                "false_refusals": round(sum(map(refuses, answerable)) / max(1, len(answerable)), 3),
                "unanswerable_refused": round(sum(map(refuses, unanswerable)) / max(1, len(unanswerable)), 3),
            }
        entry["answered_unanswerable"] = [r["id"] for r in unanswerable if not r["gate"]]
        refused = [r for r in rows if r["gate"]]
        caught = sum(1 for r in refused if not r["answerable"])
        entry["gate_precision"] = round(caught / len(refused), 3) if refused else None
        entry["gate_recall"] = round(caught / len(unanswerable), 3) if unanswerable else None
        report[target.name] = entry
        store.close()
    if args.json:
        print(json.dumps(report))
        return 0
    for name, e in report.items():
        role = "held out" if e["heldout"] else "tuned"
        print(f"\n{name} ({role})  AUC answerable vs unanswerable, unaddressed questions: "
              + ", ".join(f"{k} {v:.2f}" for k, v in e["auc"].items()))
        for rule, f in e["rules"].items():
            print(f"  {rule:46} false refusals {f['false_refusals']:.2f}   "
                  f"unanswerable refused {f['unanswerable_refused']:.2f}")
        precision = "-" if e["gate_precision"] is None else f"{e['gate_precision']:.2f}"
        recall = "-" if e["gate_recall"] is None else f"{e['gate_recall']:.2f}"
        print(f"  gate precision {precision}, recall {recall}; unanswerable questions it answers: "
              + (", ".join(e["answered_unanswerable"]) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
