"""The fusion arithmetic of hybrid retrieval: reciprocal rank fusion of the two arms'
rankings, the address rule (a rare exact phrase or a decisively rare name names its
passages, which rank first), and the superseded-document discount.

search/retrieve.py decides what is searched; this module only scores and orders, and
writes the order as hits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from search.retrieval_config import RARE_MAX_DF, RARE_MIN_LETTERS, SUPERSEDED_WEIGHT
from search.scope import Scope
from search.types import Chunk, Hit

Ranking = Sequence[tuple[str, float]]


def reciprocal_rank(
    rankings: Sequence[Ranking], rrf_k: float, weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Each candidate's fused score: the sum over rankings of weight / (rrf_k + its rank),
    every weight 1 unless given."""
    if weights is not None and len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    fused: dict[str, float] = {}
    for n, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[n]
        for i, (cid, _) in enumerate(ranking):
            fused[cid] = fused.get(cid, 0.0) + weight / (rrf_k + i + 1)
    return fused


def address_phrases(
    phrases: Sequence[tuple[tuple[str, ...], list[str]]], addressed: dict[str, float], addresses: list[str]
) -> None:
    """A rare exact phrase addresses its chunks, a longer phrase above a shorter one."""
    for gram, ids in phrases:
        addresses.append("phrase:" + " ".join(gram))
        for cid in ids:
            addressed[cid] = addressed.get(cid, 0.0) + 100.0 + len(gram)


def rare_names(dfs: Mapping[str, int], names: set[str]) -> list[str]:
    """The question's names (search.text.name_like) rare enough in the collection to be
    addresses: in 1 to RARE_MAX_DF chunks, at least RARE_MIN_LETTERS long, not a number."""
    return [term for term, df in dfs.items() if 1 <= df <= RARE_MAX_DF and rare_like(term) and term in names]


def rare_like(term: str) -> bool:
    """Whether a name could be a rare-term address whatever its count: RARE_MIN_LETTERS long, not a number."""
    return len(term) >= RARE_MIN_LETTERS and not term.isdigit()


def address_rare(
    rare: Sequence[str],
    held: Sequence[list[str]],
    dfs: Mapping[str, int],
    n_chunks: int,
    addressed: dict[str, float],
    addresses: list[str],
) -> None:
    """A rare name addresses the chunks holding it, by its IDF (below any phrase)."""
    for term, ids in zip(rare, held, strict=True):
        addresses.append(f"rare:{term}")
        for cid in ids:
            addressed[cid] = addressed.get(cid, 0.0) + math.log(n_chunks / dfs[term])


def discount_superseded(fused: dict[str, float], candidates: Mapping[str, Chunk]) -> None:
    """A passage of a superseded document keeps SUPERSEDED_WEIGHT of its fused score."""
    for cid, chunk in candidates.items():
        if chunk.superseded:
            fused[cid] *= SUPERSEDED_WEIGHT


def addresses_first(fused: Mapping[str, float], addressed: Mapping[str, float], top_k: int) -> list[str]:
    """The top_k candidates: addressed ones first (by address score), then by fused score;
    ties by chunk id, so the order never depends on the arms' dict order."""
    return sorted(fused, key=lambda c: (-addressed.get(c, 0.0), -fused[c], c))[:top_k]


def as_hits(
    order: Sequence[str],
    chunks: Mapping[str, Chunk],
    fused: Mapping[str, float],
    dense: Ranking,
    lexical: Ranking,
    addressed: Mapping[str, float],
    scope: Scope | None,
) -> list[Hit]:
    """The ordered chunks as hits, with each arm's rank and score and why it is there
    (an id without its chunk in `chunks` is left out)."""
    dense_rank = {cid: i + 1 for i, (cid, _) in enumerate(dense)}
    lexical_rank = {cid: i + 1 for i, (cid, _) in enumerate(lexical)}
    dense_score = dict(dense)
    lexical_score = dict(lexical)
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
        hits.append(
            Hit(
                chunk=chunks[cid],
                score=round(fused[cid] + addressed.get(cid, 0.0), 6),
                dense_rank=dense_rank.get(cid),
                lexical_rank=lexical_rank.get(cid),
                dense_score=dense_score.get(cid),
                lexical_score=lexical_score.get(cid),
                reasons=reasons,
            )
        )
    return hits
