"""A retrieval's result, and widening: what the answer layer reads, finished here.

`Retriever.retrieve` (search/retrieve.py) ranks the hits; asked for `passages`, it also
picks the chunks an answer is given (the top hits, each followed by its neighbour when the
question's words sit at its edge) and, asked for `windows`, their window scores. The answer
layer (bot/answer/turn.py) reads all of it from the Retrieval and goes back to no store.

Widening has one path, `widened`, used two ways: `widen_hits` for the ranked hits (the
`widen` feature of `citebot eval --compare`, docs/decisions/0024-passage-widening.md) and
`given_chunks` for the passages of an answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from search.errors import CitebotError
from search.glossary import Expansion
from search.retrieval_config import WIDEN_EDGE_SHARE, WIDEN_TOP_HITS
from search.scope import Scope
from search.store import Store
from search.support import Support
from search.text import words
from search.types import Chunk, Hit, WindowScore

# At most this many neighbours are added by widening the passages of an answer, beyond the
# passage count (docs/decisions/0024-passage-widening.md).
WIDEN_MAX_EXTRA = 2

Neighbour = Callable[[Chunk], "Chunk | None"]


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
    terms: list[str] = field(default_factory=list)  # the question's content words
    # Asked for passages: the chunks an answer is given, in order (the top hits, widened at
    # a boundary; `given_chunks`), and asked for windows, their window scores, or the error
    # the store gave instead (the answer then goes on without them and says so).
    passages: list[Chunk] = field(default_factory=list)
    windows: dict[str, list[WindowScore]] | None = None
    windows_error: CitebotError | None = None


def _positions(text: str, term: str) -> list[int]:
    out, start = [], 0
    while (i := text.find(term, start)) >= 0:
        out.append(i)
        start = i + 1
    return out


def boundary_neighbour(store: Store, chunk: Chunk, terms: Sequence[str]) -> Chunk | None:
    """The next (previous) chunk of the document when the question's words sit in the last
    (first) fifth of this one: the passage is probably cut at a boundary."""
    folded = " ".join(words(chunk.text))
    spots = [m for t in terms for m in _positions(folded, t)]
    if not spots:
        return None
    prev, nxt = store.neighbours(chunk)
    n = max(1, len(folded))
    if nxt is not None and max(spots) / n >= 1 - WIDEN_EDGE_SHARE:
        return nxt
    if prev is not None and chunk.overlap_prev == 0 and min(spots) / n <= WIDEN_EDGE_SHARE:
        return prev
    return None


def widened(
    chunks: Sequence[Chunk], neighbour: Neighbour, *, present: set[str], first: int, max_extra: int
) -> list[tuple[int, Chunk | None]]:
    """Each chunk in order as (its index, None), and after each of the first `first` the
    neighbour it was cut from as (its index, the neighbour), when not `present` nor added
    already; at most `max_extra` neighbours (none is looked for after the last)."""
    seen = set(present)
    out: list[tuple[int, Chunk | None]] = []
    extra = 0
    for i, chunk in enumerate(chunks):
        out.append((i, None))
        if i >= first or extra >= max_extra:
            continue
        found = neighbour(chunk)
        if found is not None and found.chunk_id not in seen:
            out.append((i, found))
            seen.add(found.chunk_id)
            extra += 1
    return out


def widen_hits(hits: list[Hit], neighbour: Neighbour, top_k: int) -> list[Hit]:
    """The hits with the neighbour of a top hit whose question words sit at its edge (it
    takes the hit's score), cut to top_k."""
    present = {h.chunk.chunk_id for h in hits}
    out = [
        hits[i] if extra is None else Hit(chunk=extra, score=hits[i].score, reasons=["widened"])
        for i, extra in widened(
            [h.chunk for h in hits], neighbour, present=present, first=WIDEN_TOP_HITS, max_extra=WIDEN_TOP_HITS
        )
    ]
    return out[:top_k]


def given_chunks(hits: list[Hit], count: int, neighbour: Neighbour | None) -> list[Chunk]:
    """The chunks an answer is given: the top `count` hits, in rank order; with `neighbour`,
    a hit cut at a boundary followed by its neighbour (at most WIDEN_MAX_EXTRA of them)."""
    chosen = [h.chunk for h in hits[:count]]
    if neighbour is None:
        return chosen
    return [
        chosen[i] if extra is None else extra
        for i, extra in widened(
            chosen, neighbour, present={c.chunk_id for c in chosen}, first=len(chosen), max_extra=WIDEN_MAX_EXTRA
        )
    ]
