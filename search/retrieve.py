"""Hybrid retrieval: a dense arm and a lexical arm fused in application code.

    question ─┬─ dense arm: kNN over window vectors (a chunk scores by its best window)
              └─ lexical arm: BM25 over the words, phrases found in the collection,
                 glossary aliases at reduced weight, typo fixes for absent words
    ─▶ reciprocal rank fusion with k sized to the candidate pool
    ─▶ addresses first: a decisively rare term or a rare exact phrase names a passage,
       it does not cast one vote among many

A scope (search/scope.py) is applied by the store in every read below: both arms, the
phrase and rare-term addresses, alias flood counts, typo fixes (the vocabulary), the
gate's statistics (document frequencies, chunk count) and widening.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from search import calibration
from search.glossary import Expansion, Glossary
from search.scope import Scope, limiting
from search.store import Store
from search.text import STOPWORDS, content_words, joined_terms, name_like, words
from search.types import Chunk, Hit, LexicalQuery, WeightedTerms, WindowScore

MODES = ("dense", "lexical", "hybrid")

# Candidates each arm hands to fusion; pools of 15-100 moved dev R@1 by at most 0.03
# (docs/decisions/0007-rank-fusion.md).
POOL_SIZE = 30
# k=60 is sized for pools of hundreds; k=10 keeps rank 1 worth three times rank 20
# (docs/decisions/0007-rank-fusion.md).
RRF_K = 10.0
# Aliases are our claims, not the source's words (docs/decisions/0009-alias-flood.md).
ALIAS_WEIGHT = 0.5
# A typo fix is a guess: it searches at reduced weight (not measured).
TYPO_WEIGHT = 0.7
# A name (search.text.name_like) in at most this many chunks is an address: one paragraph
# in two chunks' overlap plus one other mention (docs/decisions/0008-addresses.md).
RARE_MAX_DF = 3
# Words this short are too often codes or fragments to be addresses ("ic", "v2").
RARE_MIN_LETTERS = 4
# An exact phrase from the question in at most PHRASE_MAX_CHUNKS chunks is an address: at
# least PHRASE_MIN_CONTENT content words with no stopword at either end, or at least
# STOPWORD_PHRASE_MIN_TOKENS tokens, mostly stopwords, or words written joined
# (search.text.joined_terms); any 3-gram addressed passages by "need to be"
# (docs/decisions/0008-addresses.md, 0003-joined-words.md).
PHRASE_MAX_CHUNKS = 3
PHRASE_MIN_CONTENT = 3
PHRASE_MAX_TOKENS = 10
STOPWORD_PHRASE_MIN_TOKENS = 5
# Phrase candidates searched per question, longest first, each a store query: far above
# any real question's, far below a pasted page's (docs/decisions/0008-addresses.md).
PHRASE_CANDIDATES_MAX = 256
# An alias expansion (searched as the exact name it claims, at ALIAS_WEIGHT) is left out
# when it floods: one document holds more than FLOOD_SHARE of its matches (at least
# FLOOD_MIN_CHUNKS), or it matches more than FLOOD_COLLECTION_SHARE of all chunks
# (docs/decisions/0009-alias-flood.md).
FLOOD_SHARE = 0.5
FLOOD_MIN_CHUNKS = 4
FLOOD_COLLECTION_SHARE = 0.15
# How many matching chunks the flood check reads at most.
FLOOD_SCAN_LIMIT = 2000
# Every term group is searched again by its stems (search.text.query_stems) at this share
# of its weight, so "restarting" finds "restart" (docs/decisions/0002-stems-beside-words.md).
STEM_WEIGHT = 0.5
# The refusal gate's best_coverage looks at this many top passages.
BEST_COVERAGE_HITS = 5
# A passage of a document that calls itself deprecated or superseded keeps this share of
# its fused score: found, but below the current version
# (docs/decisions/0025-superseded-documents.md).
SUPERSEDED_WEIGHT = 0.5
# The reranker rescores this many fused candidates (addresses stay first).
RERANK_TOP_N = 20
# Widening: a hit whose question words sit in its last (first) fifth gets its next
# (previous) chunk as an extra passage, not a ranked hit
# (docs/decisions/0024-passage-widening.md).
WIDEN_EDGE_SHARE = 0.2
WIDEN_TOP_HITS = 3

Reranker = Callable[[str, Sequence[str]], Sequence[float]]


@dataclass(frozen=True)
class RetrievalConfig:
    mode: str = "hybrid"
    pool: int = POOL_SIZE
    rrf_k: float = RRF_K
    top_k: int = 10
    aliases: bool = True
    alias_weight: float = ALIAS_WEIGHT
    typo_fix: bool = True
    rare_rule: bool = True
    phrase_rule: bool = True
    stemming: bool = True
    joined_rule: bool = True
    rerank: bool = False
    widen: bool = False


@dataclass
class Support:
    """How well the retrieved passages cover the question (for the refusal gate)."""

    dense_top: float  # best cosine similarity among the candidates
    coverage: float  # share of the question's content words found in the top passages
    addressed: bool  # a rare term or phrase named a passage
    missing: list[str] = field(default_factory=list)  # content words absent from the corpus
    # The best single passage among the top BEST_COVERAGE_HITS: the share of the question's
    # word weight (IDF; a word absent from the collection weighs most) that it holds.
    best_coverage: float = 0.0
    # dense_top against this collection's null distribution (search.calibration), in
    # spreads above its mean; None when the collection is too small to have one.
    dense_z: float | None = None
    null_mean: float | None = None


@dataclass
class Retrieval:
    question: str
    hits: list[Hit]
    support: Support
    expansions: list[Expansion] = field(default_factory=list)
    flooded: list[str] = field(default_factory=list)
    corrections: dict[str, str] = field(default_factory=dict)
    addresses: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    scope: Scope | None = None  # the scope it was searched under; None = the whole collection
    # The question's vector when the dense arm ran (window_scores reuses it).
    query_vector: np.ndarray | None = field(default=None, repr=False)


def _positions(text: str, term: str) -> list[int]:
    out, start = [], 0
    while (i := text.find(term, start)) >= 0:
        out.append(i)
        start = i + 1
    return out


def _edit_distance_at_most(a: str, b: str, limit: int) -> int | None:
    if abs(len(a) - len(b)) > limit:
        return None
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        if min(cur) > limit:
            return None
        prev = cur
    return prev[-1] if prev[-1] <= limit else None


# How stale a running bot's refusal-gate calibration may be after an ingest beside it. A
# read is one SQLite row (embedded) or the index's _meta (Elasticsearch), so once a
# minute costs nothing a turn would notice.
CALIBRATION_TTL_S = 60.0


class Retriever:
    """Runs both arms against a store and fuses them."""

    def __init__(
        self,
        store: Store,
        encode_query: Callable[[str], np.ndarray],
        glossary: Glossary | None = None,
        config: RetrievalConfig | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.store = store
        self.reranker = reranker
        self.encode_query = encode_query
        self.glossary = glossary or Glossary.empty()
        self.config = config or RetrievalConfig()
        self._flood_cache: dict[tuple[tuple[str, ...], str], bool] = {}
        self._null: calibration.NullDistribution | None | Literal[False] = False  # False: not read yet
        self._null_read_at = 0.0
        self.clock = time.monotonic

    def null_distribution(self) -> calibration.NullDistribution | None:
        """The collection's calibration: stored at ingest, else measured now and kept. The
        stored one is read again every CALIBRATION_TTL_S, so a running bot takes the
        calibration of an ingest made beside it (it kept its first one for good)."""
        now = self.clock()
        if self._null is False or now - self._null_read_at >= CALIBRATION_TTL_S:
            null = calibration.stored(self.store)
            if null is None:
                null = self._null if self._null is not False else calibration.measure(
                    self.store, lambda qs: np.stack([self.encode_query(q) for q in qs]))
            self._null, self._null_read_at = null, now
        return self._null or None

    # -- query analysis -------------------------------------------------------------------
    def correct_typos(self, terms: Sequence[str], dfs: dict[str, int],
                      scope: Scope | None = None) -> dict[str, str]:
        """Fix only words absent from the collection, to the closest frequent word. The
        store offers the candidates (it never hands over its whole vocabulary)."""
        fixes: dict[str, str] = {}
        absent = [t for t in terms if dfs.get(t, 0) == 0 and len(t) >= 4 and t.isalpha()]
        if not absent:
            return fixes
        offered = self.store.spelling_candidates(absent, scope=scope)
        for term in absent:
            limit = 1 if len(term) <= 5 else 2
            best: tuple[int, str] | None = None
            for cand in offered.get(term, ()):
                if cand[0] != term[0] and (len(cand) < 2 or cand[1] != term[1]):
                    continue
                d = _edit_distance_at_most(term, cand, limit)
                # Ties go to the first word in alphabetical order, never to the vocabulary
                # set's iteration order (which follows Python's per-process hash seed:
                # examples b-04 ranked 9th under PYTHONHASHSEED=0 and fell out under 2).
                if d is not None and (best is None or (d, cand) < best):
                    best = (d, cand)
            if best:
                fixes[term] = best[1]
        if fixes:
            fdfs = self.store.doc_freqs(list(fixes.values()), scope=scope)
            fixes = {t: c for t, c in fixes.items() if fdfs.get(c, 0) > 0}
        return fixes

    def spread(self, name: str, scope: Scope | None = None) -> Counter[str]:
        """Chunks holding the exact name, counted by source document."""
        ids = self.store.phrase_matches(tuple(words(name)), FLOOD_SCAN_LIMIT, scope=scope)
        return Counter(c.source for c in self.store.get_chunks(ids)
                       if scope is None or scope.allows(c.source))

    def _floods(self, expansion: Expansion, scope: Scope | None = None) -> bool:
        key = (scope.key if scope is not None else (), expansion.expands_to)
        if key not in self._flood_cache:
            spread = self.spread(expansion.expands_to, scope)
            total = sum(spread.values())
            top = max(spread.values(), default=0)
            chunks = max(1, self.store.chunk_count(scope=scope))
            self._flood_cache[key] = (
                (total >= FLOOD_MIN_CHUNKS and top / total > FLOOD_SHARE)
                or total / chunks > FLOOD_COLLECTION_SHARE
            )
        return self._flood_cache[key]

    @staticmethod
    def is_phrase(gram: tuple[str, ...]) -> bool:
        """Whether an n-gram of the question is specific enough to be an address."""
        content = sum(1 for t in gram if t not in STOPWORDS)
        if content >= PHRASE_MIN_CONTENT:
            return gram[0] not in STOPWORDS and gram[-1] not in STOPWORDS
        return len(gram) >= STOPWORD_PHRASE_MIN_TOKENS and content <= len(gram) // 2

    def _phrases(self, question: str, scope: Scope | None = None) -> list[tuple[tuple[str, ...], list[str]]]:
        """Longest-first exact phrases of the question that the collection holds rarely."""
        tokens = words(question)
        grams: list[tuple[int, tuple[str, ...]]] = []
        for n in range(min(PHRASE_MAX_TOKENS, len(tokens)), PHRASE_MIN_CONTENT - 1, -1):
            for i in range(len(tokens) - n + 1):
                gram = tuple(tokens[i : i + n])
                if self.is_phrase(gram):
                    grams.append((i, gram))
        if self.config.joined_rule:
            # Words written joined ("analysis_limit", "extensions.worktreeConfig") are one
            # name whatever their words: a phrase candidate of any length from two.
            known = {g for _, g in grams}
            for gram in joined_terms(question):
                at = next((i for i in range(len(tokens) - len(gram) + 1)
                           if tuple(tokens[i : i + len(gram)]) == gram), None)
                if at is not None and gram not in known:
                    grams.append((at, gram))
            grams.sort(key=lambda ig: (-len(ig[1]), ig[0]))
        grams = grams[:PHRASE_CANDIDATES_MAX]
        # Every candidate in one batch (one round trip on Elasticsearch), each distinct one
        # once, then longest first: a gram inside a span already found is passed over.
        distinct = list(dict.fromkeys(g for _, g in grams))
        hits = dict(zip(distinct, self.store.phrase_matches_many(distinct, PHRASE_MAX_CHUNKS, scope=scope)
                        if distinct else [], strict=True))
        matches = [hits[g] for _, g in grams]
        found: list[tuple[tuple[str, ...], list[str]]] = []
        covered: set[int] = set()
        for (i, gram), ids in zip(grams, matches, strict=True):
            span = set(range(i, i + len(gram)))
            if span <= covered:
                continue
            if 1 <= len(ids) <= PHRASE_MAX_CHUNKS:
                found.append((gram, ids))
                covered |= span
        return found

    # -- retrieval ------------------------------------------------------------------------
    def retrieve(self, question: str, *, mode: str | None = None, top_k: int | None = None,
                 scope: Scope | None = None) -> Retrieval:
        """The ranked passages for a question; under `scope`, only passages it allows are
        read, counted or returned (the store filters; see search/scope.py)."""
        cfg = self.config
        asked_scope = scope
        scope = limiting(scope)
        mode = mode or cfg.mode
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        top_k = top_k or cfg.top_k
        timings: dict[str, float] = {}
        t0 = time.perf_counter()

        terms = content_words(question)
        dfs = self.store.doc_freqs(terms, scope=scope) if terms else {}
        n_chunks = max(1, self.store.chunk_count(scope=scope))
        corrections = self.correct_typos(terms, dfs, scope) if cfg.typo_fix else {}
        expansions = self.glossary.expansions(question) if cfg.aliases else []
        flooded = [e.expands_to for e in expansions if self._floods(e, scope)]
        expansions = [e for e in expansions if e.expands_to not in flooded]
        timings["analyse"] = (time.perf_counter() - t0) * 1000

        dense: list[tuple[str, float]] = []
        vector = None
        if mode in ("dense", "hybrid"):
            t = time.perf_counter()
            vector = self.encode_query(question)
            timings["embed"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            dense = self.store.dense(vector, cfg.pool, scope=scope)
            timings["dense"] = (time.perf_counter() - t) * 1000

        lexical: list[tuple[str, float]] = []
        phrases: list[tuple[tuple[str, ...], list[str]]] = []
        addressed: dict[str, float] = {}
        addresses: list[str] = []
        if mode in ("lexical", "hybrid"):
            t = time.perf_counter()
            groups = [WeightedTerms(tuple(terms), 1.0)] if terms else []
            if corrections:
                groups.append(WeightedTerms(tuple(corrections.values()), TYPO_WEIGHT))
            alias_phrases: list[tuple[str, float]] = []
            for e in expansions:
                name = words(e.expands_to)
                if len(name) == 1:
                    groups.append(WeightedTerms(tuple(name), cfg.alias_weight))
                elif name:
                    alias_phrases.append((" ".join(name), cfg.alias_weight))
            if cfg.stemming:
                groups += [WeightedTerms(g.terms, g.weight * STEM_WEIGHT, stemmed=True) for g in groups]
            if cfg.phrase_rule:
                phrases = self._phrases(question, scope)
            query = LexicalQuery(
                tuple(groups), tuple((" ".join(g), 1.0) for g, _ in phrases) + tuple(alias_phrases)
            )
            lexical = self.store.lexical(query, cfg.pool, scope=scope) if (groups or phrases) else []
            timings["lexical"] = (time.perf_counter() - t) * 1000
            # Addresses: rare exact phrases, then decisively rare terms.
            for gram, ids in phrases:
                addresses.append("phrase:" + " ".join(gram))
                for cid in ids:
                    addressed[cid] = addressed.get(cid, 0.0) + 100.0 + len(gram)
            if cfg.rare_rule:
                fixed = [c for c in corrections.values() if c not in dfs]
                all_dfs = {**dfs, **(self.store.doc_freqs(fixed, scope=scope) if fixed else {})}
                names = name_like(question)
                rare = [term for term, df in all_dfs.items()
                        if 1 <= df <= RARE_MAX_DF and len(term) >= RARE_MIN_LETTERS
                        and not term.isdigit() and term in names]
                held = self.store.phrase_matches_many([(t,) for t in rare], RARE_MAX_DF,
                                                      scope=scope) if rare else []
                for term, ids in zip(rare, held, strict=True):
                    addresses.append(f"rare:{term}")
                    for cid in ids:
                        addressed[cid] = addressed.get(cid, 0.0) + math.log(n_chunks / all_dfs[term])

        t = time.perf_counter()
        fused: dict[str, float] = {}
        dense_rank = {cid: i + 1 for i, (cid, _) in enumerate(dense)}
        lexical_rank = {cid: i + 1 for i, (cid, _) in enumerate(lexical)}
        dense_score = dict(dense)
        lexical_score = dict(lexical)
        for ranking in (dense, lexical):
            for i, (cid, _) in enumerate(ranking):
                fused[cid] = fused.get(cid, 0.0) + 1.0 / (cfg.rrf_k + i + 1)
        for cid in addressed:
            fused.setdefault(cid, 0.0)
        candidates = {c.chunk_id: c for c in self.store.get_chunks(list(fused))}
        for cid, chunk in candidates.items():
            if chunk.superseded:
                fused[cid] *= SUPERSEDED_WEIGHT
        order = sorted(fused, key=lambda c: (-addressed.get(c, 0.0), -fused[c], c))[:top_k]
        timings["fuse"] = (time.perf_counter() - t) * 1000

        if cfg.rerank:
            if self.reranker is None:
                raise ValueError("rerank is on but no reranker is configured (CITEBOT_RERANKER)")
            t = time.perf_counter()
            order = self._rerank(question, order, addressed, fused, scope)
            timings["rerank"] = (time.perf_counter() - t) * 1000
        missing = [c for c in order if c not in candidates]
        chunks = {**candidates, **{c.chunk_id: c for c in self.store.get_chunks(missing)}}
        hits = []
        for cid in order:
            if cid not in chunks:
                continue
            if scope is not None and not scope.allows(chunks[cid].source):
                continue  # the stores never return one; a second lock on the same door
            reasons = []
            if cid in addressed:
                reasons.append("address")
            if chunks[cid].superseded:
                reasons.append("superseded")
            hits.append(Hit(
                chunk=chunks[cid], score=round(fused[cid] + addressed.get(cid, 0.0), 6),
                dense_rank=dense_rank.get(cid), lexical_rank=lexical_rank.get(cid),
                dense_score=dense_score.get(cid), lexical_score=lexical_score.get(cid),
                reasons=reasons,
            ))
        if cfg.widen:
            hits = self._widen(hits, terms, top_k, scope)
        support = self._support(terms, dfs, corrections, expansions, hits, dense, addressed, n_chunks)
        timings["total"] = (time.perf_counter() - t0) * 1000
        return Retrieval(
            question=question, hits=hits, support=support, expansions=expansions,
            flooded=flooded, corrections=corrections, addresses=addresses,
            timings_ms={k: round(v, 2) for k, v in timings.items()}, scope=asked_scope,
            query_vector=vector,
        )

    def _rerank(self, question: str, order: list[str], addressed: dict[str, float],
                fused: dict[str, float], scope: Scope | None = None) -> list[str]:
        """Rescore the top fused candidates with the cross-encoder; addresses stay first."""
        head = [c for c in order if c in addressed]
        pool = [c for c in sorted(fused, key=lambda c: -fused[c]) if c not in addressed][:RERANK_TOP_N]
        if not pool:
            return order
        chunks = {c.chunk_id: c for c in self.store.get_chunks(pool)
                  if scope is None or scope.allows(c.source)}
        pool = [c for c in pool if c in chunks]
        reranker = self.reranker
        assert reranker is not None, "the caller refuses rerank without a reranker"
        scores = list(reranker(question, [chunks[c].text for c in pool]))
        ranked = [c for _, c in sorted(zip(scores, pool), key=lambda x: -x[0])]
        return (head + ranked)[: len(order)]

    def window_scores(self, retrieval: Retrieval, chunks: Sequence[Chunk]) -> dict[str, list[WindowScore]]:
        """Each chunk's windows with their cosine to the question (the retrieval's own
        query vector, or the question embedded now when the dense arm did not run)."""
        if not chunks:
            return {}
        vector = retrieval.query_vector
        if vector is None:
            vector = self.encode_query(retrieval.question)
        return self.store.window_scores(vector, [c.chunk_id for c in chunks])

    def boundary_neighbour(self, chunk: Chunk, terms: Sequence[str],
                           scope: Scope | None = None) -> Chunk | None:
        """The next (previous) chunk of the document when the question's words sit in the
        last (first) fifth of this one: the passage is probably cut at a boundary. A
        neighbour is of the same document, so of the same scope; checked all the same."""
        found = self._boundary_neighbour(chunk, terms)
        if found is not None and scope is not None and not scope.allows(found.source):
            return None
        return found

    def _boundary_neighbour(self, chunk: Chunk, terms: Sequence[str]) -> Chunk | None:
        folded = " ".join(words(chunk.text))
        spots = [m for t in terms for m in _positions(folded, t)]
        if not spots:
            return None
        prev, nxt = self.store.neighbours(chunk)
        n = max(1, len(folded))
        if nxt is not None and max(spots) / n >= 1 - WIDEN_EDGE_SHARE:
            return nxt
        if prev is not None and chunk.overlap_prev == 0 and min(spots) / n <= WIDEN_EDGE_SHARE:
            return prev
        return None

    def _widen(self, hits: list[Hit], terms: list[str], top_k: int,
               scope: Scope | None = None) -> list[Hit]:
        """Add the neighbour of a top hit whose question words sit at its edge."""
        present = {h.chunk.chunk_id for h in hits}
        out: list[Hit] = []
        for rank, hit in enumerate(hits):
            out.append(hit)
            if rank >= WIDEN_TOP_HITS or not terms:
                continue
            extra = self.boundary_neighbour(hit.chunk, terms, scope)
            if extra is not None and extra.chunk_id not in present:
                out.append(Hit(chunk=extra, score=hit.score, reasons=["widened"]))
                present.add(extra.chunk_id)
        return out[:top_k]

    def _support(self, terms, dfs, corrections, expansions, hits, dense, addressed,
                 n_chunks: int) -> Support:
        dense_top = max((s for _, s in dense), default=0.0)
        idf = {t: math.log((n_chunks + 1) / (dfs.get(t, 0) + 0.5)) for t in terms}
        weight = sum(idf.values()) or 1.0
        best_coverage = 0.0
        for h in hits[:BEST_COVERAGE_HITS]:
            held = set(words(h.chunk.text))
            best_coverage = max(best_coverage, sum(w for t, w in idf.items() if t in held) / weight)
        null = self.null_distribution() if dense else None
        top_text = " ".join(h.chunk.text for h in hits[:3])
        present = set(words(top_text))
        alias_words = {w for e in expansions for w in words(e.expands_to)}
        covered = 0
        for t in terms:
            if t in present or corrections.get(t) in present or (alias_words & present and t in alias_words):
                covered += 1
        coverage = covered / len(terms) if terms else 0.0
        missing = [t for t in terms if dfs.get(t, 0) == 0 and t not in corrections]
        return Support(round(dense_top, 4), round(coverage, 4), bool(addressed), missing,
                       best_coverage=round(best_coverage, 4),
                       dense_z=round(null.z(dense_top), 3) if null else None,
                       null_mean=null.mean if null else None)
