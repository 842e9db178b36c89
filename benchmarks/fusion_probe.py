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
  other chunks (hubs: text close to much of the collection);
- `extra` ["para", "title"]: the dense arm also scores each chunk by more vectors, computed
  here from the store's chunks: "para" each paragraph of a chunk of several on its own
  (heading path in front, as the stored windows), "title" the document's title and the
  chunk's heading path alone; a chunk keeps its best cosine, a "title" one times
  `title_scale` (default 1); `para_min_tokens` n: only paragraphs of n tokens or more;
- `doc_mix` β: the dense arm scores a chunk (1 − β) × its own cosine + β × the best cosine
  of any chunk of its document (a page as a whole near the question lifts its passages);
- `prf` [m, α]: the dense arm searches again with the question's vector plus α × the mean
  of the best windows of its first m chunks (pseudo-relevance feedback), and ranks by that;
- `fm_title`: every window embedded again with the `title:` of its Markdown document's
  front matter heading its heading path (the path lacks it: the loader names the page with it, 0055);
- `vocab_neighbours` [n, τ, w]: each content word of the question expanded with up to n words
  of the collection's vocabulary whose vector (the word embedded alone) has cosine >= τ to
  its own, searched by the lexical arm as one more term group at weight w (and its stemmed
  copy), as a one-word glossary alias is (benchmarks/vocab_probe.py; vectors cached beside
  the store); --show-neighbours prints each question's; `vocab_max_df` d: only the words
  the collection holds in d chunks or fewer are expanded (0: the words it lacks);
- `vocab_question` [n, τ, w]: the same group made of the n vocabulary words nearest the whole
  question's vector (cosine >= τ), none a question word or of its stem;
- `focus_lexical`: the lexical arm's plain term group is the question's content with Slack
  filler set aside (search.focus), not all its content words; with `vocab_neighbours`,
  only those words are expanded;
- `score_fusion` [alpha, "minmax" | "z"]: the arms' scores over their pools normalised and
  mixed, alpha the dense arm's share, instead of reciprocal ranks (a chunk one arm lacks
  takes that arm's lowest);
- `arm_top` [m, k]: each arm's first m chunks are within the fused order's first k places
  (one that is not is moved to place k, after the addresses);
- `typo_weight` w: the typo fixes' term group at w (search/retrieval_config.py TYPO_WEIGHT,
  0.7); `typo_stem_guard`: no fix for a word whose stem some chunk holds (with `typo_fix`
  false, a RetrievalConfig field, none at all).

Prints, per collection and variant: n, R@1, R@5, MRR and paraphrase R@5 (hybrid, or
`"mode"` in the variant), and with --ranks each item's first relevant rank; with --pair
each variant minus its base (`{}`, or `{"mode": m}` for a variant of mode m, when listed),
pooled over the collections: R@5 and paraphrase R@5, paired bootstrap, items moved.
docs/decisions/0044-dense-weight-in-fusion.md, 0050-handbook-dense-levers.md,
0056-vocabulary-neighbours.md and 0059-typo-fix-weight.md hold the figures and what was kept.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

from benchmarks import quality
from benchmarks.vocab_probe import VocabNeighbours
from ingest.embedder import Embedder
from search import embedded_lexical, fusion
from search.embedded import EmbeddedStore
from search.focus import focus
from search.glossary import Glossary
from search.retrieval_config import PHRASE_MIN_CONTENT, STEM_WEIGHT, TYPO_WEIGHT, RetrievalConfig
from search.retrieve import Retriever
from search.support import _best_coverage
from search.text import STOPWORDS, stem, words
from search.types import WeightedTerms

CONFIG_FIELDS = {f.name for f in fields(RetrievalConfig)}
PROBES = {"doc_decay", "heading_weight", "lexical_limit", "no_stopword_phrases", "lexical_coverage", "focus_dense",
          "hub", "mode", "extra", "title_scale", "doc_mix", "prf", "fm_title", "para_min_tokens",
          "vocab_neighbours", "vocab_max_df", "vocab_question",
          "focus_lexical", "typo_weight", "typo_stem_guard", "arm_top", "score_fusion"}


class Probe(Retriever):
    """citebot's Retriever with the probes above switched by `probe`."""

    def __init__(self, *args, probe: dict, neighbours=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.probe = probe
        self.neighbours = neighbours  # a VocabNeighbours for `vocab_neighbours`
        self._question = ""

    def _lexical_arm(self, question, asked, scope, timings):
        self._question = question
        return super()._lexical_arm(question, asked, scope, timings)

    def _term_groups(self, asked):
        """citebot's groups, the plain one focused (`focus_lexical`) and the neighbours added
        (`vocab_neighbours`) before the stemmed copies are made."""
        config = self.config
        self.config = replace(config, stemming=False)
        try:
            groups, alias_phrases = super()._term_groups(asked)
        finally:
            self.config = config
        if "typo_weight" in self.probe and asked.corrections:
            fixed = tuple(asked.corrections.values())
            groups = [WeightedTerms(g.terms, self.probe["typo_weight"]) if g.terms == fixed and g.weight == TYPO_WEIGHT
                      else g for g in groups]
        f = focus(self._question)
        if self.probe.get("focus_lexical") and f.changed and f.terms and groups:
            groups[0] = WeightedTerms(tuple(f.terms), groups[0].weight)
        if self.probe.get("vocab_neighbours"):
            n, tau, w = self.probe["vocab_neighbours"]
            cap = self.probe.get("vocab_max_df")
            only = None if cap is None else {t for t in asked.terms if asked.dfs.get(t, 0) <= cap}
            if self.probe.get("focus_lexical") and f.changed:  # the focused words only
                only = set(f.terms) if only is None else only & set(f.terms)
            near = self.neighbours.terms(self._question, n, tau, only)
            if near:
                groups.append(WeightedTerms(tuple(near), w))
        if self.probe.get("vocab_question"):
            n, tau, w = self.probe["vocab_question"]
            near = self.neighbours.near_vector(self.encode_query(self._question), self._question, n, tau)
            if near:
                groups.append(WeightedTerms(tuple(t for t, _ in near), w))
        if config.stemming:
            groups += [WeightedTerms(g.terms, g.weight * STEM_WEIGHT, stemmed=True) for g in groups]
        return groups, alias_phrases

    def _typo_fixes(self, terms, dfs, scope):
        """citebot's typo fixes; with `typo_stem_guard`, none for a word whose stem some
        chunk holds (the stemmed group finds its family already: "parents", "naming")."""
        if self.probe.get("typo_stem_guard"):
            terms = [t for t in terms if dfs.get(t, 0) > 0 or not self._stem_held(t)]
        return super()._typo_fixes(terms, dfs, scope)

    def _stem_held(self, term: str) -> bool:
        found = self.store._db.execute("SELECT count(*) FROM chunks_stems WHERE chunks_stems MATCH ?",
                                       (f'stems : "{stem(term)}"',)).fetchone()
        return found[0] > 0

    def is_phrase(self, gram: tuple[str, ...]) -> bool:  # type: ignore[override]
        content = sum(1 for t in gram if t not in STOPWORDS)
        if self.probe.get("no_stopword_phrases") and content < PHRASE_MIN_CONTENT:
            return False
        return Retriever.is_phrase(gram)

    def _dense_arm(self, question, expansions, scope, timings, begun, read):
        vector, plain, ranked = super()._dense_arm(question, expansions, scope, timings, begun, read)
        f = focus(question)
        if self.probe.get("focus_dense") and f.changed:
            best = dict(ranked)
            for cid, s in self.store.dense(self.encode_query(f.text), self.config.pool, scope=scope):
                best[cid] = max(s, best.get(cid, s))
            ranked = sorted(best.items(), key=lambda cs: (-cs[1], cs[0]))[: self.config.pool]
        if self.probe.get("prf"):
            m, alpha = self.probe["prf"]
            matrix, owner, ids, _ = self.store._vectors()
            row = {cid: i for i, cid in enumerate(ids)}
            best = []
            for cid, _ in ranked[:m]:
                rows = np.flatnonzero(owner == row[cid])
                best.append(matrix[rows[np.argmax(matrix[rows] @ vector)]])
            v = vector + alpha * np.mean(best, axis=0)
            ranked = self.store.dense((v / np.linalg.norm(v)).astype(np.float32), self.config.pool, scope=scope)
        return vector, plain, ranked

    def _ranked(self, question, asked, dense, lexical, top_k, scope, timings, read):
        self._asked = asked
        return super()._ranked(question, asked, dense, lexical, top_k, scope, timings, read)

    def _score_fuse(self, dense, lexical, top_k, read, alpha: float, how: str):
        """Retriever._fuse with the arms' normalised scores mixed, alpha the dense arm's share
        (a chunk one arm lacks takes that arm's lowest), in place of reciprocal ranks."""
        dn, ln = normalised(dense, how), normalised(lexical.ranking, how)
        d0, l0 = min(dn.values(), default=0.0), min(ln.values(), default=0.0)
        fused = {c: alpha * dn.get(c, d0) + (1 - alpha) * ln.get(c, l0) for c in {*dn, *ln}}
        low = min(fused.values(), default=0.0)
        fused = {c: v - low for c, v in fused.items()}  # at least 0, so the superseded discount lowers
        return self._ordered(fused, lexical, top_k, read)

    def _fuse(self, dense, lexical, top_k, read):
        """citebot's fusion (Retriever._fuse), with the probes' weight or decay."""
        config = self.config
        if "lexical_coverage" in self.probe and lexical.ranking:
            a = self._asked
            top = self.store.get_chunks([lexical.ranking[0][0]])
            held = _best_coverage(a.terms, a.dfs, a.n_chunks, [set(words(c.text)) for c in top])
            if held >= self.probe["lexical_coverage"]:
                self.config = replace(config, dense_weight=1.0)
        try:
            if "score_fusion" in self.probe:
                fused, candidates, order = self._score_fuse(dense, lexical, top_k, read, *self.probe["score_fusion"])
            else:
                fused, candidates, order = super()._fuse(dense, lexical, top_k, read)
        finally:
            self.config = config
        if "doc_decay" in self.probe:
            seen: dict[str, int] = {}
            for cid in sorted(fused, key=lambda c: (-fused[c], c)):
                source = candidates[cid].source if cid in candidates else cid
                fused[cid] *= self.probe["doc_decay"] ** seen.get(source, 0)
                seen[source] = seen.get(source, 0) + 1
            order = fusion.addresses_first(fused, lexical.addressed, top_k)
        if "arm_top" in self.probe:
            order = arm_top(order, [[c for c, _ in dense], [c for c, _ in lexical.ranking]],
                            *self.probe["arm_top"], len(lexical.addressed), top_k)
        return fused, candidates, order


def normalised(ranking: list[tuple[str, float]], how: str) -> dict[str, float]:
    """An arm's scores over its pool, min-max ("minmax") or as z-scores ("z")."""
    if not ranking:
        return {}
    scores = np.array([s for _, s in ranking], dtype=np.float64)
    if how == "z":
        scaled = (scores - scores.mean()) / (scores.std() or 1.0)
    else:
        span = scores.max() - scores.min()
        scaled = (scores - scores.min()) / span if span > 0 else np.ones_like(scores)
    return {cid: float(v) for (cid, _), v in zip(ranking, scaled, strict=True)}


def arm_top(order: list[str], arms: list[list[str]], m: int, k: int, addressed: int, top_k: int) -> list[str]:
    """The fused order with each arm's first m chunks within its first k places: one that is
    not is moved to place k (after the addresses), pushing the rest down (`arm_top`)."""
    out = list(order)
    for arm in arms:
        for cid in arm[:m]:
            at = out.index(cid) if cid in out else None
            if at is not None and at < k:
                continue
            if at is not None:
                out.pop(at)
            out.insert(max(k - 1, addressed), cid)
    return out[:top_k]


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


def extra_vectors(
    store: EmbeddedStore, embedder: Embedder, kind: str, min_tokens: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Vectors of the "extra" probe of one kind, and the row of _vectors()' ids each belongs to."""
    from ingest.embedder import _PARAGRAPH

    _, _, ids, _ = store._vectors()
    titles = dict(store._db.execute("SELECT source, title FROM documents").fetchall())
    texts: list[str] = []
    own: list[int] = []
    for n, c in enumerate(store.get_chunks(ids)):
        if kind == "title":
            path = list(c.heading_path)
            title = titles.get(c.source) or ""
            texts.append(" > ".join(([title] if title and title not in path else []) + path))
            own.append(n)
            continue
        paras = [(m.start(), m.end()) for m in _PARAGRAPH.finditer(c.text)]
        if len(paras) < 2:
            continue
        paths = [c.heading_path, *(s.heading_path for s in c.sections)]
        prefix_tokens = max(embedder.count_tokens(embedder._prefix(p)) for p in paths)
        for a, b in paras:
            if min_tokens and embedder.count_tokens(c.text[a:b]) < min_tokens:
                continue
            for w in embedder.windows(c.text[a:b], prefix_tokens):
                prefix = embedder._prefix(c.headings_between(a + w.start, a + w.end) if c.sections else c.heading_path)
                texts.append(prefix + c.text[a + w.start : a + w.end])
                own.append(n)
    return embedder.encode_texts(texts), np.array(own, dtype=np.int64)


def front_matter_title(text: str) -> str:
    """The `title:` of a Markdown file's front matter block (quotes taken off), or ""."""
    block = re.match(r"---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", text, re.DOTALL)
    title = re.search(r"^title:[ \t]*(.+?)[ \t]*$", block.group(1), re.MULTILINE) if block else None
    return title.group(1).strip("\"'") if title else ""


def fm_title_dense(store: EmbeddedStore, embedder: Embedder, docs: Path):
    """store.dense over windows embedded again with the front matter's title in front (`fm_title`)."""
    from search.types import ChunkSection

    _, _, ids, _ = store._vectors()
    titles: dict[str, str] = {}
    chunks = []
    for c in store.get_chunks(ids):
        if c.source not in titles:
            path = docs / c.source
            titles[c.source] = front_matter_title(path.read_text(errors="replace")) if path.is_file() else ""
        t = titles[c.source]
        if t and t not in c.heading_path[:1]:
            sections = tuple(ChunkSection(s.start, (t, *s.heading_path), s.anchor) for s in c.sections)
            c = replace(c, heading_path=(t, *c.heading_path), sections=sections)
        chunks.append(c)
    windows = embedder.embed_chunks(chunks)
    print(f"  {sum(1 for t in titles.values() if t)} of {len(titles)} documents with a front matter title", flush=True)
    row = {cid: i for i, cid in enumerate(ids)}
    matrix = np.stack([w.vector for w in windows])
    owner = np.array([row[w.chunk_id] for w in windows], dtype=np.int64)

    def dense(vector, k, *, scope=None):
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, matrix @ vector.astype(np.float32))
        return [(ids[i], float(best[i])) for i in np.argsort(-best, kind="stable")[:k]]

    return dense


def extra_dense(store: EmbeddedStore, extras: list[tuple[np.ndarray, np.ndarray, float]]):
    """store.dense with each chunk's best over its windows and the extra vectors."""
    matrix, owner, ids, _ = store._vectors()

    def dense(vector, k, *, scope=None):
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, matrix @ vector.astype(np.float32))
        for m, o, scale in extras:
            np.maximum.at(best, o, scale * (m @ vector.astype(np.float32)))
        return [(ids[i], float(best[i])) for i in np.argsort(-best, kind="stable")[:k]]

    return dense


def mix_with_document_best(best: np.ndarray, doc: np.ndarray, beta: float) -> np.ndarray:
    """Each chunk's score (1 − beta) × its own + beta × the best of its document's (`doc` its
    document's number)."""
    top = np.full(int(doc.max()) + 1, -np.inf, dtype=np.float32)
    np.maximum.at(top, doc, best)
    return (1 - beta) * best + beta * top[doc]


def doc_mix_dense(store: EmbeddedStore, beta: float):
    """store.dense with each chunk's cosine mixed with its document's best (`doc_mix`)."""
    matrix, owner, ids, sources = store._vectors()
    doc = np.unique(np.array(sources), return_inverse=True)[1]

    def dense(vector, k, *, scope=None):
        best = np.full(len(ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, owner, matrix @ vector.astype(np.float32))
        mixed = mix_with_document_best(best, doc, beta)
        return [(ids[i], float(mixed[i])) for i in np.argsort(-mixed, kind="stable")[:k]]

    return dense


def vocab_for(store: EmbeddedStore, store_dir: Path, embedder: Embedder) -> VocabNeighbours:
    """The collection's vocabulary neighbours, its cost printed."""
    vocab = VocabNeighbours(store, embedder, store_dir)
    how = "read from the cache" if vocab.cached else "embedded"
    print(f"  {store_dir.name}: vocabulary {len(vocab.words)} words, {how} in {vocab.seconds:.1f} s", flush=True)
    return vocab


def show_neighbours(store: EmbeddedStore, vocab: VocabNeighbours, items: list[dict], n: int, tau: float) -> None:
    """Each question's expansions for one (n, tau), each word with the chunks holding it."""
    print(f"  neighbours n={n} tau={tau} (word(chunks holding it) -> neighbour cosine):")
    for it in items:
        near = {w: found for w, found in vocab.near(it["question"], n, tau).items() if found}
        dfs = store.doc_freqs(list(near)) if near else {}
        shown = "; ".join(
            f"{w}({dfs.get(w, 0)}) -> " + ", ".join(f"{t} {c:.2f}" for t, c in found) for w, found in near.items()
        )
        print(f"    {it['id']}: {shown or '(none)'}")


def run(
    target: quality.Target, variants: list[dict], split: str, embedder: Embedder, show: bool = False
) -> list[dict]:
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
    built: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    built_dense: dict = {}
    vocab: VocabNeighbours | None = None
    shown: set[tuple[int, float]] = set()
    out = []
    for variant in variants:
        unknown = set(variant) - CONFIG_FIELDS - PROBES
        if unknown:
            raise SystemExit(f"unknown variant key(s) {sorted(unknown)}")
        embedded_lexical.HEADING_WEIGHT = variant.get("heading_weight", 0.5)
        embedded_lexical.LEXICAL_GROUP_LIMIT = variant.get("lexical_limit", group_limit)
        store.dense = hub_dense(store, variant["hub"]) if "hub" in variant else plain_dense  # type: ignore[method-assign]
        if variant.get("extra"):
            keys = [f"{k}{variant.get('para_min_tokens', 0) if k == 'para' else ''}" for k in variant["extra"]]
            for kind, key in zip(variant["extra"], keys, strict=True):
                if key not in built:
                    built[key] = extra_vectors(store, embedder, kind, variant.get("para_min_tokens", 0))
                    print(f"  {target.name}: {len(built[key][0])} {key} vectors", flush=True)
            scales = {"title": variant.get("title_scale", 1.0)}
            extras = [(*built[key], scales.get(k, 1.0)) for k, key in zip(variant["extra"], keys, strict=True)]
            store.dense = extra_dense(store, extras)  # type: ignore[method-assign]
        if variant.get("fm_title"):
            if "fm_title" not in built_dense:
                built_dense["fm_title"] = fm_title_dense(store, embedder, target.docs)
            store.dense = built_dense["fm_title"]  # type: ignore[method-assign]
        if "doc_mix" in variant:
            store.dense = doc_mix_dense(store, variant["doc_mix"])  # type: ignore[method-assign]
        if variant.get("vocab_neighbours") or variant.get("vocab_question"):
            vocab = vocab or vocab_for(store, store_dir, embedder)
        if variant.get("vocab_neighbours"):
            n, tau, _ = variant["vocab_neighbours"]
            if show and (n, tau) not in shown:
                shown.add((n, tau))
                show_neighbours(store, vocab, items, n, tau)
        if variant.get("vocab_question") and show:
            n, tau, _ = variant["vocab_question"]
            print(f"  words nearest the question n={n} tau={tau}:")
            for it in items:
                near = vocab.near_vector(encode(it["question"]), it["question"], n, tau)
                print(f"    {it['id']}: " + (", ".join(f"{t} {c:.2f}" for t, c in near) or "(none)"))
        config = RetrievalConfig(**{k: v for k, v in variant.items() if k in CONFIG_FIELDS})
        retriever = Probe(store, encode, glossary, config, probe=variant, neighbours=vocab)
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
            "ranks": ranks, "paraphrase": para,
        })
    embedded_lexical.HEADING_WEIGHT = 0.5
    embedded_lexical.LEXICAL_GROUP_LIMIT = group_limit
    if vocab is not None and vocab.encode_ms:
        ms = np.percentile(vocab.encode_ms, [50, 95])
        print(f"  {target.name}: the question's words embedded in one call: p50 {ms[0]:.1f} ms, p95 {ms[1]:.1f} ms "
              f"({len(vocab.encode_ms)} questions)", flush=True)
    return out


def paired(rows: list[dict], variants: list[dict]) -> None:
    """Each variant minus its base (the variant of the list that is `{}` in the same mode), pooled
    over the collections: R@5, paraphrase R@5 and MRR with quality.paired_bootstrap, items moved."""
    for variant in variants:
        base = {"mode": variant["mode"]} if variant.get("mode", "hybrid") != "hybrid" else {}
        if variant == base or base not in variants:
            continue
        a, b, pa, pb, ma, mb, gained, lost = [], [], [], [], [], [], [], []
        for row in (r for r in rows if r["variant"] == variant):
            old = next(r for r in rows if r["collection"] == row["collection"] and r["variant"] == base)
            for item, rank in row["ranks"].items():
                was = old["ranks"][item]
                x, y = float(bool(was and was <= 5)), float(bool(rank and rank <= 5))
                a.append(x), b.append(y), ma.append(1 / was if was else 0.0), mb.append(1 / rank if rank else 0.0)
                if item in row["paraphrase"]:
                    pa.append(x), pb.append(y)
                (gained if y > x else lost if x > y else []).append(item)
        figures = [quality.paired_bootstrap(np.array(u), np.array(v)) for u, v in ((a, b), (pa, pb), (ma, mb))]
        shown = ", ".join(f"{name} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for name, (d, lo, hi) in
                          zip(("R@5", "para@5", "MRR"), figures, strict=True))
        print(f"{json.dumps(variant)} minus {json.dumps(base)} ({len(a)} items, {len(pa)} paraphrase): {shown}; "
              f"gained {', '.join(gained) or 'none'}; lost {', '.join(lost) or 'none'}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--collections", required=True, help="comma-separated; examples for the sample handbook")
    p.add_argument("--variants", default="[{}]", help="a JSON list of variants (see above)")
    p.add_argument("--split", default="dev", choices=("dev", "heldout", "all"))
    p.add_argument("--ranks", action="store_true", help="print each item's first relevant rank too")
    p.add_argument("--show-neighbours", action="store_true", help="print each question's vocab_neighbours")
    p.add_argument("--pair", action="store_true", help="pair each variant with its base, pooled over the collections")
    args = p.parse_args(argv)
    variants = json.loads(args.variants)
    embedder = Embedder()
    rows = []
    for target in quality.targets(args.collections.split(",")):
        if target.heldout:
            raise SystemExit(f"{target.name} is held out whole: measure it with benchmarks.quality, once")
        for row in run(target, variants, args.split, embedder, args.show_neighbours):
            rows.append(row)
            print(f"{row['collection']:16s} {json.dumps(row['variant']):40s} n={row['n']:3d} R@1={row['r1']:.3f} "
                  f"R@5={row['r5']:.3f} MRR={row['mrr']:.3f} para@5={row['para_r5']:.3f}", flush=True)
            if args.ranks:
                print("  " + json.dumps(row["ranks"]))
    if args.pair:
        paired(rows, variants)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
