"""The refusal gate's signals, per question, on the evaluation collections: how well each
separates answerable from unanswerable questions, what a few candidate rules refuse, and
how much any rule of a signal could refuse at all.

    python -m benchmarks.gate_signals [--collections examples,git,haproxy] [--split dev]
        [--sentences] [--json] [--model DIR]

Reads the embedded stores that benchmarks/quality.py builds (run it first; it reads
CITEBOT_QUALITY_CACHE like quality.py); retrieval is hybrid with each collection's
glossary, exactly as `citebot eval` runs it. Tune on the tuned collections' dev items only
(`--split dev`): a held-out collection belongs in this table once, at the end, and is
always read whole (all its items are held out). --model DIR reads the stores quality.py
built with `--model DIR` (<name>-<folder>-store) and embeds the questions with that model.

Signals. Retrieval: dense_top, dense_z (against the collection's null, search.calibration),
coverage, best_coverage (search.support.Support). Answer level, from the top
BEST_COVERAGE_HITS passages as the composer reads them (bot.answer.sentences, stems of
bot.answer.compose):
  sentence_coverage  the question's IDF word weight that one sentence holds (best sentence)
  window_coverage    the same for a sentence with its two neighbours
  focus_together     1 when the question's two rarest words (that the collection holds)
                     sit together in one such window, else 0
  arm_agreement      the share of the dense arm's top 5 that is also in the lexical top 5
  sentence_similarity  (--sentences: embeds every sentence, slow) the best cosine between
                     the question and one sentence of the top passages

Per signal the script prints its ROC area (answerable above unanswerable, questions no
rare name or phrase addressed) and its ceiling: the share of unanswerable questions that
"refuse when signal < t" refuses at the t fitted to that very collection so that at most
CEILING_FALSE_REFUSALS of its answerable questions are refused. That t is fitted to the
answer key, so the ceiling bounds what any calibration of that one signal can reach.
Last, the best rule "dense_z <= a and S <= b" fitted on all listed collections together
with at most CEILING_FALSE_REFUSALS false refusals on each (again an upper bound).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from benchmarks import quality
from bot.answer.compose import stem
from bot.answer.gate import (
    ANSWER,
    CLOSEST,
    GATE_BEST_COVERAGE_MAX,
    GATE_DENSE_MIN_UNCALIBRATED,
    GATE_Z_MAX,
    OUTCOMES,
    REFUSED,
    Gate,
)
from bot.answer.sentences import sentence_spans
from bot.evaluate import load_items
from ingest.embedder import Embedder
from search.embedded import EmbeddedStore
from search.focus import focus
from search.glossary import Glossary
from search.retrieval_config import BEST_COVERAGE_HITS
from search.retrieve import Retriever
from search.support import Support
from search.text import content_words, words
from search.types import Hit

RETRIEVAL_SIGNALS = ("dense_top", "dense_z", "coverage", "best_coverage", "focus_coverage", "evidence")
ANSWER_SIGNALS = ("sentence_coverage", "window_coverage", "focus_together", "arm_agreement")
# The goal: at most 5% of answerable questions refused.
CEILING_FALSE_REFUSALS = 0.05
# Sentences shorter than this many words are headings or code fragments, not answers.
SIMILARITY_MIN_WORDS = 3
# The composer embeds at most this many characters of a sentence (bot.answer.compose).
SIMILARITY_MAX_CHARS = 240
# What the arms' agreement compares: each arm's first this many.
AGREEMENT_TOP = 5
RULES = {
    "the earlier rule": None,  # reproduced below from its constants
    "dense_z < 0": lambda s: s["dense_z"] is not None and s["dense_z"] < 0,
    "two-outcome gate (dense_z < 0 and best_coverage < 0.35)": lambda s: s["dense_z"] is not None
    and s["dense_z"] < 0 and s["best_coverage"] < 0.35,
    "the same on evidence (best_coverage or focus_coverage)": lambda s: s["dense_z"] is not None
    and s["dense_z"] < 0 and s["evidence"] < 0.35,
    "gate: refused flatly": "gate",
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


def answer_signals(question: str, hits: list[Hit], dfs: dict[str, int], n_chunks: int) -> dict:
    """The answer-level signals of one question (see the module's docstring)."""
    terms = content_words(question)
    stems = {t: stem(t) for t in terms}
    idf = {t: math.log((n_chunks + 1) / (dfs.get(t, 0) + 0.5)) for t in terms}
    weight = sum(idf.values()) or 1.0
    held = sorted((t for t in terms if dfs.get(t, 0) > 0), key=lambda t: (dfs[t], t))
    focus = {stems[t] for t in held[:2]}
    best_sentence = best_window = 0.0
    together = 0.0
    for h in hits[:BEST_COVERAGE_HITS]:
        text = h.chunk.text
        sents = [{stem(w) for w in words(text[a:b])} for a, b in sentence_spans(text, wrapped=True)]
        for i, s in enumerate(sents):
            window = s.union(*sents[max(0, i - 1):i], *sents[i + 1:i + 2])
            best_sentence = max(best_sentence, sum(w for t, w in idf.items() if stems[t] in s) / weight)
            best_window = max(best_window, sum(w for t, w in idf.items() if stems[t] in window) / weight)
            if focus and focus <= window:
                together = 1.0
    dense = {h.chunk.chunk_id for h in hits if h.dense_rank and h.dense_rank <= AGREEMENT_TOP}
    lexical = {h.chunk.chunk_id for h in hits if h.lexical_rank and h.lexical_rank <= AGREEMENT_TOP}
    return {"sentence_coverage": round(best_sentence, 4), "window_coverage": round(best_window, 4),
            "focus_together": together, "arm_agreement": len(dense & lexical) / AGREEMENT_TOP}


def sentence_similarity(question: str, hits: list[Hit], embedder: Embedder) -> float:
    """The best cosine between the question and one sentence of the top passages."""
    texts = [h.chunk.text[a:b][:SIMILARITY_MAX_CHARS] for h in hits[:BEST_COVERAGE_HITS]
             for a, b in sentence_spans(h.chunk.text, wrapped=True)
             if len(h.chunk.text[a:b].split()) >= SIMILARITY_MIN_WORDS]
    if not texts:
        return 0.0
    return round(float(np.max(embedder.encode_texts(texts) @ embedder.encode_query(question))), 4)


def ceiling(rows: list[dict], signal: str) -> float | None:
    """Unanswerable share refused by "not addressed and signal < t" at this collection's
    own best t with at most CEILING_FALSE_REFUSALS of its answerable questions refused."""
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    if not answerable or not unanswerable:
        return None
    def value(r: dict) -> float:  # an addressed question is never refused: above every t
        return math.inf if r["addressed"] or r[signal] is None else r[signal]

    allowed = int(CEILING_FALSE_REFUSALS * len(answerable))
    t = sorted(map(value, answerable))[allowed]  # refusing below it refuses <= allowed
    return sum(1 for r in unanswerable if value(r) < t) / len(unanswerable)


def best_joint_rule(by_collection: dict[str, list[dict]], signal: str) -> dict | None:
    """The rule "not addressed and dense_z <= a and signal <= b" that refuses the most
    unanswerable questions on average with at most CEILING_FALSE_REFUSALS false refusals
    on every collection, a and b fitted on all of them together. Exact: a best rule can
    always be moved down to values an unanswerable question holds, so only those are tried."""
    rows = [r for rs in by_collection.values() for r in rs
            if not r["addressed"] and r["dense_z"] is not None and r[signal] is not None]
    targets = [r for r in rows if not r["answerable"]]
    best = None
    for a in sorted({r["dense_z"] for r in targets}):
        for b in sorted({r[signal] for r in targets}):
            refused = {id(r) for r in rows if r["dense_z"] <= a and r[signal] <= b}
            shares = {}
            for name, rs in by_collection.items():
                ans = [r for r in rs if r["answerable"]]
                un = [r for r in rs if not r["answerable"]]
                shares[name] = (sum(id(r) in refused for r in ans) / max(1, len(ans)),
                                sum(id(r) in refused for r in un) / max(1, len(un)))
            if max(f for f, _ in shares.values()) > CEILING_FALSE_REFUSALS:
                continue
            mean = sum(u for _, u in shares.values()) / len(shares)
            if best is None or mean > best["mean_unanswerable_refused"]:
                best = {"dense_z_at_most": a, "at_most": b, "mean_unanswerable_refused": round(mean, 3),
                        "per_collection": {k: {"false_refusals": round(f, 3), "unanswerable_refused": round(u, 3)}
                                           for k, (f, u) in shares.items()}}
    return best


def _r5(hits: list[Hit], must: tuple[str, ...]) -> float:
    return 1.0 if any(m in h.chunk.text for h in hits[:5] for m in must) else 0.0


# The flat refusal's candidate edges: "refuse when the gate would not answer, dense_z < a
# and evidence < b".
GRID_Z = (-3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0)
GRID_EVIDENCE = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35)


def flat(r: dict, a: float, b: float) -> bool:
    """Whether the row is refused flatly at edges a (dense_z) and b (evidence)."""
    if r["addressed"] or r["evidence"] >= GATE_BEST_COVERAGE_MAX:
        return False
    if r["dense_z"] is None:
        return r["dense_top"] < GATE_DENSE_MIN_UNCALIBRATED and r["evidence"] < b
    return r["dense_z"] < min(a, GATE_Z_MAX) and r["evidence"] < b


def flat_refusal_grid(by_collection: dict[str, list[dict]]) -> list[dict]:
    """For each (a, b): per collection, the answerable and unanswerable shares refused
    flatly (the rest of what the answer rule does not answer is "closest")."""
    out = []
    for a in GRID_Z:
        for b in GRID_EVIDENCE:
            per = {}
            for name, rs in by_collection.items():
                ans = [r for r in rs if r["answerable"]]
                un = [r for r in rs if not r["answerable"]]
                per[name] = (round(sum(flat(r, a, b) for r in ans) / max(1, len(ans)), 3),
                             round(sum(flat(r, a, b) for r in un) / max(1, len(un)), 3))
            out.append({"z_below": a, "evidence_below": b, "per_collection": per,
                        "max_false_refusals": max((f for f, _ in per.values()), default=0.0),
                        "mean_unanswerable_refused": round(sum(u for _, u in per.values()) / max(1, len(per)), 3)})
    return out


# The gate's own edges tried per model: answer outright at dense_z >= z_max (GATE_Z_MAX),
# "closest" at dense_z >= closest_z_min (CLOSEST_Z_MIN); the coverage edges kept.
GRID_Z_MAX = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
GRID_CLOSEST_Z_MIN = (-1.5, -1.0, -0.5, 0.0, 0.5, 1.0)


def gate_edge_grid(supports: dict[str, list[tuple[bool, Support | None]]]) -> list[dict]:
    """For each (z_max, closest_z_min) with closest_z_min <= z_max: per collection, the
    answerable share refused flatly and labelled "closest", and the unanswerable share
    answered outright (refusal correctness counts an unanswerable "closest" as correct).
    A question without hits (support None) is refused whatever the edges."""
    out = []
    for z_max in GRID_Z_MAX:
        for z_min in (z for z in GRID_CLOSEST_Z_MIN if z <= z_max):
            gate = Gate(z_max=z_max, closest_z_min=z_min)
            per = {}
            for name, items in supports.items():
                ans = [gate.judge(s).outcome if s else REFUSED for answerable, s in items if answerable]
                un = [gate.judge(s).outcome if s else REFUSED for answerable, s in items if not answerable]
                per[name] = {"false_refusals": round(ans.count(REFUSED) / max(1, len(ans)), 3),
                             "closest_answerable": round(ans.count(CLOSEST) / max(1, len(ans)), 3),
                             "unanswerable_answered": round(un.count(ANSWER) / max(1, len(un)), 3)}
            out.append({"z_max": z_max, "closest_z_min": z_min, "per_collection": per,
                        "max_false_refusals": max((v["false_refusals"] for v in per.values()), default=0.0)})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", default="examples,git,haproxy,sqlite")
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="all",
                        help="the items of the tuned collections to read (held-out collections are read whole)")
    parser.add_argument("--sentences", action="store_true",
                        help="also the best question-sentence cosine (embeds every sentence of the top passages)")
    parser.add_argument("--focus-retrieval", action="store_true",
                        help="also Recall@5 of the answerable questions retrieved on their content "
                             "(search.focus) instead of as written")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--model", type=Path, help="embedding model folder of quality.py --model; default: bundled")
    args = parser.parse_args()
    model = args.model.expanduser().resolve() if args.model else None
    embedder = Embedder(model)
    gate = Gate.for_model(embedder.stamp.name)
    signals = (*RETRIEVAL_SIGNALS, *ANSWER_SIGNALS, *(("sentence_similarity",) if args.sentences else ()))
    report: dict[str, dict] = {}
    all_rows: dict[str, list[dict]] = {}
    supports: dict[str, list[tuple[bool, Support | None]]] = {}
    for target in quality.targets(args.collections.split(",")):
        store_dir = quality.QUALITY_CACHE / f"{target.name}{f'-{model.name}' if model else ''}-store"
        if not store_dir.exists():
            print(f"{target.name}: no store at {store_dir}: run benchmarks/quality.py first",
                  file=sys.stderr)
            continue
        store = EmbeddedStore(store_dir)
        store.open_for(embedder.stamp)
        glossary = Glossary.load(target.glossary) if target.glossary else Glossary.empty()
        retriever = Retriever(store, embedder.encode_query, glossary)
        n_chunks = store.chunk_count()
        rows = []
        supports[target.name] = []
        for item in load_items(target.questions):
            if not target.heldout and args.split != "all" and item.split != args.split:
                continue
            retrieval = retriever.retrieve(item.question)
            s = retrieval.support
            supports[target.name].append((item.answerable, s if retrieval.hits else None))
            dfs = store.doc_freqs(content_words(item.question))
            row = {"id": item.id, "answerable": item.answerable, "addressed": s.addressed,
                   "dense_top": s.dense_top, "dense_z": s.dense_z, "coverage": s.coverage,
                   "best_coverage": s.best_coverage, "focus_coverage": s.focus_coverage,
                   "evidence": s.evidence, "missing": s.missing,
                   **answer_signals(item.question, retrieval.hits, dfs, n_chunks),
                   "outcome": gate.judge(s).outcome if retrieval.hits else REFUSED}
            row["gate"] = row["outcome"] == REFUSED
            if args.focus_retrieval and item.answerable:
                row["r5"] = _r5(retrieval.hits, item.must_contain)
                row["r5_focused"] = _r5(retriever.retrieve(focus(item.question).text).hits, item.must_contain)
            if args.sentences:
                row["sentence_similarity"] = sentence_similarity(item.question, retrieval.hits, embedder)
            rows.append(row)
        all_rows[target.name] = rows
        free = [r for r in rows if not r["addressed"]]
        entry: dict = {"auc": {}, "ceiling": {}, "rules": {}, "heldout": target.heldout, "items": len(rows)}
        for sig in signals:
            pos = [r[sig] for r in free if r["answerable"] and r[sig] is not None]
            neg = [r[sig] for r in free if not r["answerable"] and r[sig] is not None]
            entry["auc"][sig] = round(auc(pos, neg), 3)
            c = ceiling(rows, sig)
            entry["ceiling"][sig] = None if c is None else round(c, 3)
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
        entry["answered_unanswerable"] = [r["id"] for r in unanswerable if r["outcome"] == ANSWER]
        entry["outcomes"] = {kind: {o: round(sum(r["outcome"] == o for r in rs) / max(1, len(rs)), 3)
                                    for o in OUTCOMES}
                             for kind, rs in (("answerable", answerable), ("unanswerable", unanswerable))}
        if args.focus_retrieval:
            entry["r5"] = {k: round(sum(r[k] for r in answerable) / max(1, len(answerable)), 3)
                           for k in ("r5", "r5_focused")}
        refused = [r for r in rows if r["gate"]]
        caught = sum(1 for r in refused if not r["answerable"])
        entry["gate_precision"] = round(caught / len(refused), 3) if refused else None
        entry["gate_recall"] = round(caught / len(unanswerable), 3) if unanswerable else None
        report[target.name] = entry
        store.close()
    joint = {sig: best_joint_rule(all_rows, sig) for sig in signals if sig != "dense_z"} if all_rows else {}
    grid = flat_refusal_grid(all_rows)
    edges = gate_edge_grid(supports)
    if args.json:
        print(json.dumps({"collections": report, "joint_rules": joint, "split": args.split, "grid": grid,
                          "gate_edges": edges, "model": str(model) if model else "bundled"}))
        return 0
    for name, e in report.items():
        role = "held out" if e["heldout"] else f"tuned, {args.split} items"
        print(f"\n{name} ({role}, {e['items']} questions)")
        print(f"  {'signal':22}{'ROC area':>10}{'ceiling':>10}   (ROC: unaddressed questions; ceiling: "
              f"unanswerable refused at <= {CEILING_FALSE_REFUSALS:.0%} false refusals, t fitted here)")
        for sig in signals:
            a, c = e["auc"][sig], e["ceiling"][sig]
            print(f"  {sig:22}{a:>10.2f}{'-' if c is None else f'{c:.2f}':>10}")
        for rule, f in e["rules"].items():
            print(f"  {rule:46} false refusals {f['false_refusals']:.2f}   "
                  f"unanswerable refused {f['unanswerable_refused']:.2f}")
        precision = "-" if e["gate_precision"] is None else f"{e['gate_precision']:.2f}"
        recall = "-" if e["gate_recall"] is None else f"{e['gate_recall']:.2f}"
        print(f"  gate precision {precision}, recall {recall}; unanswerable questions it answers: "
              + (", ".join(e["answered_unanswerable"]) or "none"))
        print("  outcomes: " + "; ".join(f"{k} " + ", ".join(f"{o} {v:.2f}" for o, v in d.items())
                                         for k, d in e["outcomes"].items()))
        if "r5" in e:
            print(f"  Recall@5 as written {e['r5']['r5']:.3f}, retrieved on the content {e['r5']['r5_focused']:.3f}")
    print("\nflat refusal 'not answered and dense_z < a and evidence < b' (the rest not answered is "
          "'closest'): false refusals per collection | unanswerable refused flatly per collection")
    for g in grid:
        per = g["per_collection"]
        print(f"  a={g['z_below']:+.1f} b={g['evidence_below']:.2f}: max false refusals "
              f"{g['max_false_refusals']:.2f} ({', '.join(f'{k} {f:.2f}' for k, (f, _) in per.items())}) | "
              f"mean {g['mean_unanswerable_refused']:.2f} ({', '.join(f'{k} {u:.2f}' for k, (_, u) in per.items())})")
    print("\nthe gate at z_max (answer at dense_z >= it) and closest_z_min: per collection false refusals / "
          "answerable 'closest' / unanswerable answered outright")
    for g in edges:
        per = g["per_collection"]
        print(f"  z_max={g['z_max']:+.1f} closest_z_min={g['closest_z_min']:+.1f}: "
              + ", ".join(f"{k} {v['false_refusals']:.2f}/{v['closest_answerable']:.2f}/"
                          f"{v['unanswerable_answered']:.2f}" for k, v in per.items()))
    print(f"\nbest rule 'not addressed and dense_z <= a and S <= b', a and b fitted on {', '.join(all_rows)} "
          f"together, at most {CEILING_FALSE_REFUSALS:.0%} false refusals on each:")
    for sig, b in joint.items():
        if b is None:
            print(f"  {sig:22} no rule refuses an unanswerable question and keeps false refusals down")
            continue
        per = ", ".join(f"{k} {v['unanswerable_refused']:.2f}" for k, v in b["per_collection"].items())
        print(f"  {sig:22} a={b['dense_z_at_most']:.3g} b={b['at_most']:.3g}: mean unanswerable refused "
              f"{b['mean_unanswerable_refused']:.2f} ({per})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
