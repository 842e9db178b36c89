"""Hybrid retrieval: a dense arm and a lexical arm fused in application code.

    question ─┬─ dense arm: kNN over window vectors (a chunk scores by its best window);
              │  with a glossary name, the question embedded again with the other name
              │  beside it, and each chunk keeps its better score of the two
              └─ lexical arm: BM25 over the words, phrases found in the collection,
                 glossary aliases at reduced weight, typo fixes for absent words
    ─▶ reciprocal rank fusion with k sized to the candidate pool
    ─▶ addresses first: a decisively rare term or a rare exact phrase names a passage,
       it does not cast one vote among many

The question's own embedding and dense read run on a worker thread beside the analysis and
the lexical arm, joined before fusion (search/dense_arm.py).

A scope (search/scope.py) is applied by the store in every read below: both arms, the
phrase and rare-term addresses, alias flood counts, typo fixes (the vocabulary), the
gate's statistics (document frequencies, chunk count) and widening.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from search import calibration, fusion, phrases, typos
from search.dense_arm import Begun, with_aliases
from search.errors import CitebotError
from search.focus import focus
from search.fusion import rare_like
from search.glossary import Expansion, Glossary
from search.retrieval import Retrieval, boundary_neighbour, given_chunks, widen_hits
from search.retrieval_config import (
    CALIBRATION_TTL_S,
    FLOOD_COLLECTION_SHARE,
    FLOOD_MIN_CHUNKS,
    FLOOD_SCAN_LIMIT,
    FLOOD_SHARE,
    MODES,
    PROBE_LIMIT,
    RERANK_TOP_N,
    STEM_WEIGHT,
    TYPO_WEIGHT,
    RetrievalConfig,
)
from search.scope import Scope, limiting
from search.store import Store
from search.support import support_of
from search.text import content_words, letters_only, name_like, quoted_terms, words
from search.types import Chunk, Hit, LexicalQuery, WeightedTerms, WindowScore

__all__ = ["Reranker", "Retrieval", "Retriever"]

Reranker = Callable[[str, Sequence[str]], Sequence[float]]


@dataclass
class _Analysis:
    """What retrieve reads about the question before either arm runs."""

    terms: list[str]
    dfs: dict[str, int]
    n_chunks: int
    corrections: dict[str, str]
    expansions: list[Expansion]
    flooded: list[str]
    fixed_dfs: dict[str, int] = field(default_factory=dict)  # the typo fixes' own, as counted
    grams: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)  # phrase candidates
    held: dict[tuple[str, ...], list[str]] = field(default_factory=dict)  # probes answered early
    names: set[str] = field(default_factory=set)  # the question's name-like words (rare-term rule)


@dataclass
class _LexicalArm:
    """The lexical arm's ranking and the addresses it found (chunk id -> address score)."""

    ranking: list[tuple[str, float]] = field(default_factory=list)
    chunks: dict[str, Chunk] = field(default_factory=dict)  # read with the ranking (Store.lexical)
    addressed: dict[str, float] = field(default_factory=dict)
    addresses: list[str] = field(default_factory=list)


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
        # Which aliases flood, per scope: kept CALIBRATION_TTL_S, as the calibration is, so a
        # running bot takes the spread of an ingest made beside it.
        self._flood_cache: dict[tuple[tuple[str, ...], str], bool] = {}
        self._flood_read_at = 0.0
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
                null = (
                    self._null
                    if self._null is not False
                    else calibration.measure(self.store, lambda qs: np.stack([self.encode_query(q) for q in qs]))
                )
            self._null, self._null_read_at = null, now
        return self._null or None

    # -- query analysis -------------------------------------------------------------------
    def correct_typos(self, terms: Sequence[str], dfs: dict[str, int], scope: Scope | None = None) -> dict[str, str]:
        """Fix only words absent from the collection, to the closest frequent word. The
        store offers the candidates (it never hands over its whole vocabulary)."""
        return self._typo_fixes(terms, dfs, scope)[0]

    def _typo_fixes(
        self, terms: Sequence[str], dfs: dict[str, int], scope: Scope | None
    ) -> tuple[dict[str, str], dict[str, int]]:
        """correct_typos, and the fixes' document frequencies it read (kept for the
        rare-name rule, which would otherwise read them again)."""
        fixes: dict[str, str] = {}
        fdfs: dict[str, int] = {}
        absent = [t for t in terms if dfs.get(t, 0) == 0 and len(t) >= 4 and letters_only(t)]
        if not absent:
            return fixes, fdfs
        offered = self.store.spelling_candidates(absent, scope=scope)
        for term in absent:
            fix = typos.closest(term, offered.get(term, ()))
            if fix is not None:
                fixes[term] = fix
        if fixes:
            fdfs = self.store.doc_freqs(list(fixes.values()), scope=scope)
            fixes = {t: c for t, c in fixes.items() if fdfs.get(c, 0) > 0}
        return fixes, fdfs

    def spread(self, name: str, scope: Scope | None = None) -> Counter[str]:
        """Chunks holding the exact name, counted by source document."""
        ids = self.store.phrase_matches(tuple(words(name)), FLOOD_SCAN_LIMIT, scope=scope)
        return Counter(c.source for c in self.store.get_chunks(ids) if scope is None or scope.allows(c.source))

    def _floods(self, expansion: Expansion, scope: Scope | None = None) -> bool:
        key = (scope.key if scope is not None else (), expansion.expands_to)
        now = self.clock()
        if now - self._flood_read_at >= CALIBRATION_TTL_S:
            self._flood_cache.clear()
            self._flood_read_at = now
        if key not in self._flood_cache:
            spread = self.spread(expansion.expands_to, scope)
            total = sum(spread.values())
            top = max(spread.values(), default=0)
            chunks = max(1, self.store.chunk_count(scope=scope))
            self._flood_cache[key] = (
                total >= FLOOD_MIN_CHUNKS and top / total > FLOOD_SHARE
            ) or total / chunks > FLOOD_COLLECTION_SHARE
        return self._flood_cache[key]

    @staticmethod
    def is_phrase(gram: tuple[str, ...]) -> bool:
        """Whether an n-gram of the question is specific enough to be an address (search/phrases.py)."""
        return phrases.is_phrase(gram)

    # -- retrieval ------------------------------------------------------------------------
    def retrieve(
        self, question: str, *, mode: str | None = None, top_k: int | None = None, scope: Scope | None = None
    ) -> Retrieval:
        """The ranked passages for a question; under `scope`, only passages it allows are
        read, counted or returned (the store filters; see search/scope.py). `finish` adds
        what an answer is given, once the gate has let the question through."""
        mode, top_k = self._settle(mode, top_k)
        limited = limiting(scope)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        # The question's embedding and dense read, on a worker beside the analysis and the
        # lexical arm; joined before fusion (search/dense_arm.py). A failure surfaces as it
        # would in the order analysis, dense arm, lexical arm.
        begun = Begun(self.encode_query, self.store, question, self.config.pool, limited) if mode != "lexical" else None
        try:
            asked = self._analyse(question, limited, probing=mode != "dense")
        except BaseException:
            if begun is not None:
                begun.settle()
            raise
        timings["analyse"] = (time.perf_counter() - t0) * 1000
        lexical = _LexicalArm()
        lexical_ms: dict[str, float] = {}
        try:
            if mode in ("lexical", "hybrid"):
                lexical = self._lexical_arm(question, asked, limited, lexical_ms)
        except BaseException:
            if begun is not None:
                begun.result()  # the dense arm's failure first, as when it ran before this one
            raise
        vector: np.ndarray | None = None
        dense: list[tuple[str, float]] = []
        plain: list[tuple[str, float]] = []  # the question's own: the gate reads only these
        read = dict(lexical.chunks)  # chunks the arms' reads brought along (Store.dense, .lexical)
        if begun is not None:
            vector, plain, dense = self._dense_arm(question, asked.expansions, limited, timings, begun, read)
        timings.update(lexical_ms)
        hits = self._ranked(question, asked, dense, lexical, top_k, limited, timings, read)
        null = self.null_distribution() if plain else None
        support = support_of(
            asked.terms,
            asked.dfs,
            asked.corrections,
            asked.expansions,
            hits,
            plain,
            lexical.addressed,
            asked.n_chunks,
            null,
            focus(question),
        )
        retrieval = Retrieval(
            question=question,
            hits=hits,
            support=support,
            expansions=asked.expansions,
            flooded=asked.flooded,
            corrections=asked.corrections,
            addresses=lexical.addresses,
            scope=scope,
            query_vector=vector,
            terms=asked.terms,
        )
        timings["total"] = (time.perf_counter() - t0) * 1000
        retrieval.timings_ms = {k: round(v, 2) for k, v in timings.items()}
        return retrieval

    def finish(self, retrieval: Retrieval, passages: int, windows: bool = False) -> None:
        """Finish a retrieval for an answer (search/retrieval.py): the `passages` chunks it
        is given, widened at a boundary, and with `windows` their window scores. Apart from
        `retrieve`, so a question the gate refuses reads neither."""
        timings: dict[str, float] = {}
        self._give(retrieval, passages, windows, limiting(retrieval.scope), timings)
        retrieval.timings_ms.update({k: round(v, 2) for k, v in timings.items()})

    def _settle(self, mode: str | None, top_k: int | None) -> tuple[str, int]:
        """The mode and depth asked for, or the configuration's."""
        mode = mode or self.config.mode
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        return mode, top_k or self.config.top_k

    def _ranked(
        self,
        question: str,
        asked: _Analysis,
        dense: list[tuple[str, float]],
        lexical: _LexicalArm,
        top_k: int,
        scope: Scope | None,
        timings: dict[str, float],
        read: dict[str, Chunk],
    ) -> list[Hit]:
        """The arms fused, reranked when configured, as hits, widened when configured."""
        t = time.perf_counter()
        fused, candidates, order = self._fuse(dense, lexical, top_k, read)
        timings["fuse"] = (time.perf_counter() - t) * 1000
        if self.config.rerank:
            if self.reranker is None:
                raise ValueError("rerank is on but no reranker is configured (CITEBOT_RERANKER)")
            t = time.perf_counter()
            order = self._rerank(question, order, lexical.addressed, fused, scope)
            timings["rerank"] = (time.perf_counter() - t) * 1000
        missing = [c for c in order if c not in candidates]
        chunks = {**candidates, **{c.chunk_id: c for c in self.store.get_chunks(missing)}}
        hits = fusion.as_hits(order, chunks, fused, dense, lexical.ranking, lexical.addressed, scope)
        if self.config.widen:
            hits = widen_hits(hits, lambda c: self.boundary_neighbour(c, asked.terms, scope), top_k)
        return hits

    def _give(
        self, retrieval: Retrieval, count: int, windows: bool, scope: Scope | None, timings: dict[str, float]
    ) -> None:
        """What an answer is given: the top `count` hits widened at a boundary, and with
        `windows` their window scores; a store that cannot give those leaves its error in
        the retrieval (the answer goes on without them and says so)."""
        t = time.perf_counter()
        terms = retrieval.terms
        retrieval.passages = given_chunks(retrieval.hits, count, lambda c: self.boundary_neighbour(c, terms, scope))
        timings["widen"] = (time.perf_counter() - t) * 1000
        if not windows:
            return
        t = time.perf_counter()
        try:
            retrieval.windows = self.window_scores(retrieval, retrieval.passages)
        except CitebotError as exc:
            retrieval.windows_error = exc
        finally:
            timings["windows"] = (time.perf_counter() - t) * 1000

    def _analyse(self, question: str, scope: Scope | None, probing: bool = True) -> _Analysis:
        """The question's content words, their document frequencies, typo fixes, and its
        glossary aliases with the flooding ones left out. With `probing`, the lexical arm's
        phrase candidates and possible rare names go with the counts: a store that can
        answers their probes in the same round trip (docs/decisions/0054-fewer-elastic-round-trips.md)."""
        cfg = self.config
        terms = content_words(question)
        quoted = quoted_terms(question) if cfg.quoted_rule and probing else []
        grams = (
            phrases.candidates(question, self.is_phrase, cfg.joined_rule, quoted) if cfg.phrase_rule and probing else []
        )
        names = name_like(question) if cfg.rare_rule and probing else set()
        if cfg.rare_rule:
            # A word the writer quoted ('misfeature') is marked as a term, as a name is.
            names |= {g[0] for g in quoted if len(g) == 1}
        early = list(dict.fromkeys([g for _, g in grams] + [(t,) for t in terms if t in names and rare_like(t)]))
        held: dict[tuple[str, ...], list[str]] = {}
        dfs, count = self.store.term_stats(terms, scope=scope, probes=early, limit=PROBE_LIMIT, held=held)
        n_chunks = max(1, count)
        corrections, fixed_dfs = self._typo_fixes(terms, dfs, scope) if cfg.typo_fix else ({}, {})
        expansions = self.glossary.expansions(question) if cfg.aliases else []
        flooded = [e.expands_to for e in expansions if self._floods(e, scope)]
        expansions = [e for e in expansions if e.expands_to not in flooded]
        return _Analysis(terms, dfs, n_chunks, corrections, expansions, flooded, fixed_dfs, grams, held, names)

    def _dense_arm(
        self,
        question: str,
        expansions: list[Expansion],
        scope: Scope | None,
        timings: dict[str, float],
        begun: Begun,
        read: dict[str, Chunk],
    ) -> tuple[np.ndarray, list[tuple[str, float]], list[tuple[str, float]]]:
        """The begun arm joined: the question's vector, its nearest chunks, and the arm's
        ranking, with glossary names embedded once more (search/dense_arm.py); the chunks
        its reads brought along go into `read`. `dense_wait` is how long the retrieval
        waited here for the worker (0 when it had finished)."""
        t = time.perf_counter()
        done = begun.result()
        read.update(done.chunks)
        timings.update(done.timings)
        timings["dense_wait"] = (time.perf_counter() - t) * 1000
        if not expansions:
            return done.vector, done.ranking, done.ranking
        t = time.perf_counter()
        ranked = with_aliases(
            self.encode_query, self.store, question, expansions, done.ranking, self.config.pool, scope, read
        )
        timings["dense_aliases"] = (time.perf_counter() - t) * 1000
        return done.vector, done.ranking, ranked

    def _lexical_arm(
        self, question: str, asked: _Analysis, scope: Scope | None, timings: dict[str, float]
    ) -> _LexicalArm:
        """BM25 over the term groups and phrases, then the addresses: rare exact phrases,
        then decisively rare names. The phrase candidates and the rare names are probed in
        one batch (one round trip on Elasticsearch), each distinct one once, unless the
        analysis' read answered them already."""
        cfg = self.config
        t = time.perf_counter()
        groups, alias_phrases = self._term_groups(asked)
        grams = phrases.without_absent(asked.grams, asked.dfs)
        rare, all_dfs = self._rare_names(asked, scope) if cfg.rare_rule else ([], asked.dfs)
        probes = [p for p in dict.fromkeys([g for _, g in grams] + [(r,) for r in rare]) if p not in asked.held]
        held = {
            **asked.held,
            **dict(
                zip(
                    probes,
                    self.store.phrase_matches_many(probes, PROBE_LIMIT, scope=scope) if probes else [],
                    strict=True,
                )
            ),
        }
        found = phrases.found(grams, held)
        query = LexicalQuery(tuple(groups), tuple((" ".join(g), 1.0) for g, _ in found) + tuple(alias_phrases))
        arm = _LexicalArm()
        arm.ranking = self.store.lexical(query, cfg.pool, scope=scope, chunks=arm.chunks) if (groups or found) else []
        timings["lexical"] = (time.perf_counter() - t) * 1000
        fusion.address_phrases(found, arm.addressed, arm.addresses)
        if rare:
            fusion.address_rare(rare, [held[(r,)] for r in rare], all_dfs, asked.n_chunks, arm.addressed, arm.addresses)
        return arm

    def _term_groups(self, asked: _Analysis) -> tuple[list[WeightedTerms], list[tuple[str, float]]]:
        """The weighted term groups (words, typo fixes, one-word aliases, and all of them
        again by their stems) and the aliases searched as exact names."""
        cfg = self.config
        groups = [WeightedTerms(tuple(asked.terms), 1.0)] if asked.terms else []
        if asked.corrections:
            groups.append(WeightedTerms(tuple(asked.corrections.values()), TYPO_WEIGHT))
        alias_phrases: list[tuple[str, float]] = []
        for e in asked.expansions:
            name = words(e.expands_to)
            if len(name) == 1:
                groups.append(WeightedTerms(tuple(name), cfg.alias_weight))
            elif name:
                alias_phrases.append((" ".join(name), cfg.alias_weight))
        if cfg.stemming:
            groups += [WeightedTerms(g.terms, g.weight * STEM_WEIGHT, stemmed=True) for g in groups]
        return groups, alias_phrases

    def _rare_names(self, asked: _Analysis, scope: Scope | None) -> tuple[list[str], dict[str, int]]:
        """The rare-term address candidates: the question's names (typo fixes included)
        that the collection holds in at most RARE_MAX_DF chunks; and the document
        frequencies they were judged by."""
        fixed = [c for c in asked.corrections.values() if c not in asked.dfs]
        unread = [c for c in fixed if c not in asked.fixed_dfs]
        read = {**asked.fixed_dfs, **(self.store.doc_freqs(unread, scope=scope) if unread else {})}
        all_dfs = {**asked.dfs, **{c: read[c] for c in fixed}}
        return fusion.rare_names(all_dfs, asked.names), all_dfs

    def _fuse(
        self, dense: list[tuple[str, float]], lexical: _LexicalArm, top_k: int, read: dict[str, Chunk]
    ) -> tuple[dict[str, float], dict[str, Chunk], list[str]]:
        """Reciprocal rank fusion of the arms, addressed chunks added, superseded documents
        discounted; the fused scores, the candidates read (those the arms' reads brought
        along, `read`, and the rest now), and the top_k order."""
        fused = fusion.reciprocal_rank((dense, lexical.ranking), self.config.rrf_k, (self.config.dense_weight, 1.0))
        return self._ordered(fused, lexical, top_k, read)

    def _ordered(
        self, fused: dict[str, float], lexical: _LexicalArm, top_k: int, read: dict[str, Chunk]
    ) -> tuple[dict[str, float], dict[str, Chunk], list[str]]:
        """Fused scores made an order: addressed chunks added, the candidates read (those
        `read` holds, the rest now), superseded documents discounted, addresses first."""
        for cid in lexical.addressed:
            fused.setdefault(cid, 0.0)
        fetched = {c.chunk_id: c for c in self.store.get_chunks([c for c in fused if c not in read])}
        candidates = {c: chunk for c in fused if (chunk := read.get(c) or fetched.get(c)) is not None}
        fusion.discount_superseded(fused, candidates)
        return fused, candidates, fusion.addresses_first(fused, lexical.addressed, top_k)

    def _rerank(
        self,
        question: str,
        order: list[str],
        addressed: dict[str, float],
        fused: dict[str, float],
        scope: Scope | None = None,
    ) -> list[str]:
        """Rescore the top fused candidates with the cross-encoder; addresses stay first."""
        head = [c for c in order if c in addressed]
        pool = [c for c in sorted(fused, key=lambda c: -fused[c]) if c not in addressed][:RERANK_TOP_N]
        if not pool:
            return order
        chunks = {c.chunk_id: c for c in self.store.get_chunks(pool) if scope is None or scope.allows(c.source)}
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

    def boundary_neighbour(self, chunk: Chunk, terms: Sequence[str], scope: Scope | None = None) -> Chunk | None:
        """The next (previous) chunk of the document when the question's words sit in the
        last (first) fifth of this one (search/retrieval.py). A neighbour is of the same
        document, so of the same scope; checked all the same."""
        found = boundary_neighbour(self.store, chunk, terms)
        if found is not None and scope is not None and not scope.allows(found.source):
            return None
        return found
