"""Probes of hybrid fusion and the two arms on the dev items of labelled collections.

    CITEBOT_QUALITY_CACHE=DIR python -m benchmarks.fusion_probe --collections clef-handbook,18f-handbook \
        --variants '[{"dense_weight": 1}, {}, {"doc_decay": 0.7}]'

Reads the stores `benchmarks.quality` built (run it first: it fetches and ingests), and
runs every variant over the same items in this process; the query vectors are computed
once. A variant is a JSON object of RetrievalConfig fields (`dense_weight`, `rrf_k`,
`pool`; `{}` is citebot as it is) and of probes citebot does not run:

- `doc_decay` d: in the fused order, the n-th passage of a document keeps d^(n-1) of its
  score (several windows of one page crowding out other pages);
- `heading_weight` w: the lexical arm's heading column at w (embedded store; 0.5 now);
- `lexical_limit` n: the FTS5 rows each lexical term group reads before the groups are
  summed (search/embedded_lexical.py LEXICAL_GROUP_LIMIT);
- `no_stopword_phrases`: no address by a phrase of mostly stopwords ("do i need to do");
- `lexical_coverage` c: the dense weight as set when the lexical arm's first passage
  holds less than c of the question's IDF word weight, else 1;
- `focus_dense`: the dense arm also searches the question's content (search.focus), each
  chunk keeping its better score;
- `hub` λ: each window's cosine less λ × its mean cosine to its 10 nearest windows of
  other chunks (hubs: text close to much of the collection).

Prints, per collection and variant: n, R@1, R@5, MRR and paraphrase R@5 (hybrid, or
`"mode"` in the variant), and with --ranks each item's first relevant rank.
docs/decisions/0044-dense-weight-in-fusion.md holds the figures and what was kept.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

from benchmarks import quality
from ingest.embedder import Embedder
from search import embedded_lexical, fusion
from search.embedded import EmbeddedStore
from search.focus import focus
from search.glossary import Glossary
from search.retrieval_config import PHRASE_MIN_CONTENT, RetrievalConfig
from search.retrieve import Retriever
from search.support import _best_coverage
from search.text import STOPWORDS, words

CONFIG_FIELDS = {f.name for f in fields(RetrievalConfig)}
PROBES = {"doc_decay", "heading_weight", "lexical_limit", "no_stopword_phrases", "lexical_coverage", "focus_dense", "hub", "mode"}


class Probe(Retriever):
    """citebot's Retriever with the probes above switched by `probe`."""

    def __init__(self, *args, probe: dict, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.probe = probe

    def is_phrase(self, gram: tuple[str, ...]) -> bool:  # type: ignore[override]
        content = sum(1 for t in gram if t not in STOPWORDS)
        if self.probe.get("no_stopword_phrases") and content < PHRASE_MIN_CONTENT:
            return False
        return Retriever.is_phrase(gram)

    def _dense_arm(self, question, expansions, scope, timings):
        vector, plain, ranked = super()._dense_arm(question, expansions, scope, timings)
        f = focus(question)
        if self.probe.get("focus_dense") and f.changed:
            best = dict(ranked)
            for cid, s in self.store.dense(self.encode_query(f.text), self.config.pool, scope=scope):
                best[cid] = max(s, best.get(cid, s))
            ranked = sorted(best.items(), key=lambda cs: (-cs[1], cs[0]))[: self.config.pool]
        return vector, plain, ranked

    def _ranked(self, question, asked, dense, lexical, top_k, scope, timings):
        self._asked = asked
        return super()._ranked(question, asked, dense, lexical, top_k, scope, timings)

    def _fuse(self, dense, lexical, top_k):
        """citebot's fusion (Retriever._fuse), with the probes' weight or decay."""
        config = self.config
        if "lexical_coverage" in self.probe and lexical.ranking:
            a = self._asked
            top = self.store.get_chunks([lexical.ranking[0][0]])
            held = _best_coverage(a.terms, a.dfs, a.n_chunks, [set(words(c.text)) for c in top])
            if held >= self.probe["lexical_coverage"]:
                self.config = replace(config, dense_weight=1.0)
        try:
            fused, candidates, order = super()._fuse(dense, lexical, top_k)
        finally:
            self.config = config
        if "doc_decay" in self.probe:
            seen: dict[str, int] = {}
            for cid in sorted(fused, key=lambda c: (-fused[c], c)):
                source = candidates[cid].source if cid in candidates else cid
                fused[cid] *= self.probe["doc_decay"] ** seen.get(source, 0)
                seen[source] = seen.get(source, 0) + 1
            order = fusion.addresses_first(fused, lexical.addressed, top_k)
        return fused, candidates, order


def hub_dense(store: EmbeddedStore, lam: float):
    """store.dense with each window's cosine less lam × its hubness."""
    matrix, owner, ids, _ = store._vectors()
    sim = matrix @ matrix.T
    sim[owner[:, None] == owner[None, :]] = -1.0
    hubness = np.sort(sim, axis=1)[:, -10:].mean(axis=1)

    def dense(vector, k, *, scope=None):
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, matrix @ vector.astype(np.float32) - lam * hubness)
        return [(ids[i], float(best[i])) for i in np.argsort(-best, kind="stable")[:k]]

    return dense


def run(target: quality.Target, variants: list[dict], split: str, embedder: Embedder) -> list[dict]:
    store_dir = quality.QUALITY_CACHE / f"{target.name}-store"
    if not store_dir.exists():
        raise SystemExit(f"{store_dir} is missing: run python -m benchmarks.quality --collections {target.name}")
    store = EmbeddedStore(store_dir)
    glossary = Glossary.load(target.glossary) if target.glossary else Glossary.empty()
    items = [json.loads(line) for line in Path(target.questions).read_text().splitlines() if line.strip()]
    items = [i for i in items if i["must_contain"] and (split == "all" or i.get("split", "dev") == split)]
    vectors: dict[str, np.ndarray] = {}

    def encode(q: str) -> np.ndarray:
        if q not in vectors:
            vectors[q] = embedder.encode_query(q)
        return vectors[q]

    plain_dense = store.dense
    group_limit = embedded_lexical.LEXICAL_GROUP_LIMIT
    out = []
    for variant in variants:
        unknown = set(variant) - CONFIG_FIELDS - PROBES
        if unknown:
            raise SystemExit(f"unknown variant key(s) {sorted(unknown)}")
        embedded_lexical.HEADING_WEIGHT = variant.get("heading_weight", 0.5)
        embedded_lexical.LEXICAL_GROUP_LIMIT = variant.get("lexical_limit", group_limit)
        store.dense = hub_dense(store, variant["hub"]) if "hub" in variant else plain_dense  # type: ignore[method-assign]
        config = RetrievalConfig(**{k: v for k, v in variant.items() if k in CONFIG_FIELDS})
        retriever = Probe(store, encode, glossary, config, probe=variant)
        ranks = {}
        for it in items:
            hits = retriever.retrieve(it["question"], mode=variant.get("mode", "hybrid"), top_k=10).hits
            found = [i + 1 for i, h in enumerate(hits) if any(s in h.chunk.text for s in it["must_contain"])]
            ranks[it["id"]] = found[0] if found else None
        para = [i["id"] for i in items if i["kind"] == "paraphrase"]
        n = len(items) or 1
        out.append({
            "collection": target.name, "variant": variant, "n": len(items),
            "r1": sum(1 for r in ranks.values() if r == 1) / n,
            "r5": sum(1 for r in ranks.values() if r and r <= 5) / n,
            "mrr": sum(1 / r for r in ranks.values() if r) / n,
            "para_r5": sum(1 for i in para if ranks[i] and ranks[i] <= 5) / (len(para) or 1),
            "ranks": ranks,
        })
    embedded_lexical.HEADING_WEIGHT = 0.5
    embedded_lexical.LEXICAL_GROUP_LIMIT = group_limit
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--collections", required=True, help="comma-separated; examples for the sample handbook")
    p.add_argument("--variants", default="[{}]", help="a JSON list of variants (see above)")
    p.add_argument("--split", default="dev", choices=("dev", "heldout", "all"))
    p.add_argument("--ranks", action="store_true", help="print each item's first relevant rank too")
    args = p.parse_args(argv)
    variants = json.loads(args.variants)
    embedder = Embedder()
    for target in quality.targets(args.collections.split(",")):
        if target.heldout:
            raise SystemExit(f"{target.name} is held out whole: measure it with benchmarks.quality, once")
        for row in run(target, variants, args.split, embedder):
            print(f"{row['collection']:16s} {json.dumps(row['variant']):40s} n={row['n']:3d} R@1={row['r1']:.3f} "
                  f"R@5={row['r5']:.3f} MRR={row['mrr']:.3f} para@5={row['para_r5']:.3f}", flush=True)
            if args.ranks:
                print("  " + json.dumps(row["ranks"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
