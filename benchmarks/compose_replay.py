"""Sentence choice alone: the extractive composer replayed on frozen passages.

`benchmarks/answers.py` runs whole turns (retrieval, gate, compose, checks) and takes
minutes a collection. To study and compare sentence choice, this retrieves and selects
passages once per answerable question (as a turn does; the gate is not asked) and keeps
them in a cache file, then runs ExtractiveComposer.pick on them and reports, of the items
whose passages hold a label, how many had one quoted (bot/evaluate.py `overlaps`, the
judge answers.py uses). With --show, each miss is printed: the label, and what was quoted.

    .venv/bin/python -m benchmarks.compose_replay --collections git,sqlite [--split dev]
        [--show] [--words-only] [--shortlist N] [--no-windows] [--model DIR]
        [--dense-weight 0.6] [--window-weight 0.3] [--save FILE] [--baseline FILE]

The store is CITEBOT_QUALITY_CACHE/<name>-store (as answers.py); the passages are cached
in CITEBOT_REPLAY_CACHE (default /tmp/citebot-replay) as <name>-<hash of the store path and
its .code stamp>.pkl, and the sentence vectors in vectors.pkl beside them (the same text,
the same vector).
--model DIR reads the stores quality.py built with `--model DIR` (<name>-<folder>-store),
retrieves and embeds with that model, and keeps its vectors in vectors-<folder>.pkl.
--dense-weight and --window-weight replace compose.py's DENSE_WEIGHT and WINDOW_WEIGHT
for the run (the cosine terms of a sentence's score).
--save writes each given item's outcome (collection, id, held-out collection or not,
quoted or not) as JSON; --baseline reads such a file and prints this run minus it, a
paired bootstrap over the items given in both (benchmarks/quality.py paired_bootstrap):
the held-out collections, the tuned collections, all, then each collection.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import sys
from dataclasses import replace
from pathlib import Path

from benchmarks.answers import targets
from bot.answer.compose import SHORTLIST, ExtractiveComposer
from bot.evaluate import load_items, overlaps

CACHE = Path(os.environ.get("CITEBOT_REPLAY_CACHE", "/tmp/citebot-replay"))
CACHE_FORMAT = 2


def frozen_passages(t, items, store: Path | None = None) -> dict[str, tuple]:
    """Per item id: (question, passages, expansions), retrieved once and cached (items not
    in the cache yet are retrieved and added). `store`: another store than the target's."""
    store = store or t.store
    code = store.with_name(store.name + ".code")
    # The cache's own format is in the stamp: passages cached before they carried their
    # window scores (CACHE_FORMAT 1) are not taken for today's.
    stamp = hashlib.sha256(f"{CACHE_FORMAT}:{store}:{code.read_text() if code.exists() else ''}"
                           .encode()).hexdigest()[:12]
    path = CACHE / f"{t.name}-{stamp}.pkl"
    out = pickle.loads(path.read_bytes()) if path.exists() else {}
    missing = [i for i in items if i.id not in out]
    if not missing:
        return out
    os.environ["CITEBOT_STORE"] = str(store)
    os.environ.pop("CITEBOT_ES_URL", None)
    if t.glossary:
        os.environ["CITEBOT_GLOSSARY"] = str(t.glossary)
    else:
        os.environ.pop("CITEBOT_GLOSSARY", None)
    from bot.answer.turn import Answerer, new_record
    from bot.evaluate import MemoryTurnLog
    from bot.memory.state import InProcessState
    from bot.settings import load_settings
    from bot.wiring import Components

    c = Components(load_settings())
    retriever = c.retriever()
    # Passages exactly as a turn gives them (Answerer.retrieve, .passages), for the extractive composer.
    answerer = Answerer(retriever, ExtractiveComposer(None), MemoryTurnLog(), InProcessState(),
                        passages=c.settings.passages)
    for item in missing:
        r = answerer.retrieve(item.question)
        record = new_record(item.question)
        passages = answerer.passages(record, r)
        if record.errors:
            raise SystemExit(f"{t.name} {item.id}: {record.errors[0]}")
        out[item.id] = (item.question, passages, r.expansions)
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(out))
    return out


class CachedEncoder:
    """The embedder's encode_texts, remembering each text's vector (in a file between runs):
    a replay of a changed composer embeds only the texts it had not met."""

    def __init__(self, encode, path: Path) -> None:
        self.encode, self.path = encode, path
        self.vectors = pickle.loads(path.read_bytes()) if path.exists() else {}
        self.added = 0

    def __call__(self, texts):
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            self.vectors.update(zip(missing, self.encode(missing)))
            self.added += len(missing)
        return np.stack([self.vectors[t] for t in texts])

    def save(self) -> None:
        if self.added:
            CACHE.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(pickle.dumps(self.vectors))


def compare(base: list[dict], now: list[dict]) -> None:
    """Print now minus base (the share of items quoting a label), paired over the items in both."""
    import numpy as np

    from benchmarks.quality import paired_bootstrap

    before = {(r["collection"], r["id"]): r["quoted"] for r in base}
    rows = [(r, before[(r["collection"], r["id"])]) for r in now if (r["collection"], r["id"]) in before]
    groups = [("held-out collections", lambda r: r["heldout"]), ("tuned collections", lambda r: not r["heldout"]),
              ("all", lambda r: True)]
    for name in dict.fromkeys(r["collection"] for r, _ in rows):
        groups.append((name, lambda r, name=name: r["collection"] == name))
    print(f"{'paired over':22} {'n':>4}  {'before':>6} {'after':>6}  {'diff [95%]':>24}  gained lost")
    for label, keep in groups:
        a = np.array([float(b) for r, b in rows if keep(r)])
        b = np.array([float(r["quoted"]) for r, _ in rows if keep(r)])
        mean, lo, hi = paired_bootstrap(a, b)
        gained, lost = int((b > a).sum()), int((b < a).sum())
        print(f"{label:22} {len(a):4}  {a.mean() if len(a) else 0:6.3f} {b.mean() if len(b) else 0:6.3f}  "
              f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]  {gained:6} {lost:4}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collections", required=True, help="comma-separated names")
    ap.add_argument("--split", default="dev", help="dev, heldout or all (default dev)")
    ap.add_argument("--show", action="store_true", help="print each item given a label and not quoting one")
    ap.add_argument("--shortlist", type=int, default=SHORTLIST, help=f"candidates embedded (default {SHORTLIST})")
    ap.add_argument("--words-only", action="store_true", help="no embedding (the floor)")
    ap.add_argument("--no-windows", action="store_true",
                    help="passages without their window scores (compose.py WINDOW_WEIGHT off)")
    ap.add_argument("--model", type=Path, help="embedding model folder of quality.py --model; default: bundled")
    ap.add_argument("--dense-weight", type=float, help="compose.py DENSE_WEIGHT for this run")
    ap.add_argument("--window-weight", type=float, help="compose.py WINDOW_WEIGHT for this run")
    ap.add_argument("--save", type=Path, help="write each given item's outcome here (JSON)")
    ap.add_argument("--baseline", type=Path, help="a --save file: print this run minus it, paired over items")
    args = ap.parse_args()
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    from bot.answer import compose

    if args.dense_weight is not None:
        compose.DENSE_WEIGHT = args.dense_weight
    if args.window_weight is not None:
        compose.WINDOW_WEIGHT = args.window_weight
    model = args.model.expanduser().resolve() if args.model else None
    if model:
        os.environ["CITEBOT_MODEL_DIR"] = str(model)
    encode = None
    if not args.words_only:
        from bot.settings import load_settings
        from bot.wiring import Components

        encode = CachedEncoder(Components(load_settings()).embedder.encode_texts,
                               CACHE / (f"vectors-{model.name}.pkl" if model else "vectors.pkl"))
    composer = ExtractiveComposer(encode, shortlist=args.shortlist)
    total_given = total_quoted = 0
    outcomes: list[dict] = []
    for t in targets(args.collections.split(",")):
        items = [i for i in load_items(t.questions, split=args.split) if i.answerable]
        frozen = frozen_passages(t, items, t.store.with_name(f"{t.name}-{model.name}-store") if model else None)
        given = quoted = 0
        for item in items:
            if item.id not in frozen:
                continue
            question, passages, expansions = frozen[item.id]
            if args.no_windows:
                passages = [replace(p, windows=()) for p in passages]
            if not any(s in p.chunk.text for p in passages for s in item.must_contain):
                continue
            given += 1
            picked = composer.pick(question, passages, expansions)
            hit = any(overlaps(q.text, s) for q in picked for s in item.must_contain)
            quoted += hit
            outcomes.append({"collection": t.name, "id": item.id, "heldout": t.heldout, "quoted": hit})
            if args.show and not hit:
                where = [p.number for p in passages for s in item.must_contain if s in p.chunk.text]
                print(f"--- {t.name} {item.id}: {question}\n  label in [{','.join(map(str, where))}]: "
                      f"{' | '.join(item.must_contain)[:300]}")
                for q in picked:
                    print(f"  quoted [{q.passage}] {q.score:.3f}: {q.text[:300]}")
        total_given += given
        total_quoted += quoted
        print(f"{t.name:18} given {given:4}  quoted {quoted:4}  rate {quoted / given if given else 0:.3f}")
    if encode is not None:
        encode.save()
    print(f"{'all':18} given {total_given:4}  quoted {total_quoted:4}  "
          f"rate {total_quoted / total_given if total_given else 0:.3f}")
    if args.save:
        args.save.write_text(json.dumps(outcomes, indent=0) + "\n")
    if baseline is not None:
        compare(baseline, outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
