"""The retriever's tuned constants and its configuration (RetrievalConfig).

Each constant carries one line of why beside it and the decision record that measured
it; search/retrieve.py runs the stages, search/fusion.py does the arithmetic they feed.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("dense", "lexical", "hybrid")

# Candidates each arm hands to fusion; pools of 15-100 moved dev R@1 by at most 0.03
# (docs/decisions/0007-rank-fusion.md).
POOL_SIZE = 30
# k=60 is sized for pools of hundreds; k=10 keeps rank 1 worth three times rank 20
# (docs/decisions/0007-rank-fusion.md).
RRF_K = 10.0
# The dense arm's ranks count this many times the lexical arm's in fusion: on questions
# asked in Slack language the lexical arm's first places are often common words
# (docs/decisions/0044-dense-weight-in-fusion.md).
DENSE_WEIGHT = 2.0
# Aliases are our claims, not the source's words (docs/decisions/0009-alias-flood.md).
ALIAS_WEIGHT = 0.5
# A typo fix is a guess: it searches at reduced weight; 0.35, 1.0 or none moved no dev item
# (docs/decisions/0059-typo-fix-weight.md).
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
# The phrase candidates and the rare names are probed in one batch, each read to this
# many chunks (one more tells "more than"); each rule then applies its own bound
# (docs/decisions/0048-lexical-stage-cost.md).
PROBE_LIMIT = max(PHRASE_MAX_CHUNKS, RARE_MAX_DF)
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

# How stale a running bot's refusal-gate calibration may be after an ingest beside it. A
# read is one SQLite row (embedded) or the index's _meta (Elasticsearch), so once a
# minute costs nothing a turn would notice.
CALIBRATION_TTL_S = 60.0


@dataclass(frozen=True)
class RetrievalConfig:
    """Which arms and rules a Retriever runs, and its sizes (the evaluation and the
    benchmarks switch them one at a time)."""

    mode: str = "hybrid"
    pool: int = POOL_SIZE
    rrf_k: float = RRF_K
    dense_weight: float = DENSE_WEIGHT
    top_k: int = 10
    aliases: bool = True
    alias_weight: float = ALIAS_WEIGHT
    typo_fix: bool = True
    rare_rule: bool = True
    phrase_rule: bool = True
    stemming: bool = True
    joined_rule: bool = True
    quoted_rule: bool = True
    rerank: bool = False
    widen: bool = False
