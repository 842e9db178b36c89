"""The support signals the refusal gate reads (bot/answer/gate.py): how well the
retrieved passages cover the question, whether an address named one, and the dense arm's
best similarity against the collection's calibration (search/calibration.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from search import calibration
from search.focus import Focus
from search.glossary import Expansion
from search.retrieval_config import BEST_COVERAGE_HITS
from search.text import words
from search.types import Hit

# `coverage` reads the words of the first three passages together.
COVERAGE_HITS = 3


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
    # best_coverage over the question's content once Slack preamble and filler are set
    # aside (search.focus), and the words set aside.
    focus_coverage: float = 0.0
    set_aside: list[str] = field(default_factory=list)

    @property
    def evidence(self) -> float:
        """The share of the question's word weight the best passage holds, the question
        read as written or for its content, whichever is more (the gate reads this)."""
        return max(self.best_coverage, self.focus_coverage)


def support_of(
    terms: list[str],
    dfs: dict[str, int],
    corrections: dict[str, str],
    expansions: list[Expansion],
    hits: list[Hit],
    dense: list[tuple[str, float]],
    addressed: dict[str, float],
    n_chunks: int,
    null: calibration.NullDistribution | None,
    focused: Focus | None = None,
) -> Support:
    """The gate's signals for one retrieval (`null`: the collection's calibration, when the
    dense arm ran; `focused`: the question's content, search.focus)."""
    dense_top = max((s for _, s in dense), default=0.0)
    read = [set(words(h.chunk.text)) for h in hits[: max(BEST_COVERAGE_HITS, COVERAGE_HITS)]]
    held = read[:BEST_COVERAGE_HITS]
    best_coverage = _best_coverage(terms, dfs, n_chunks, held)
    focus_coverage = (
        _best_coverage(focused.terms, dfs, n_chunks, held) if focused is not None and focused.changed else best_coverage
    )
    present = set().union(*read[:COVERAGE_HITS])
    alias_words = {w for e in expansions for w in words(e.expands_to)}
    covered = 0
    for t in terms:
        if t in present or corrections.get(t) in present or (alias_words & present and t in alias_words):
            covered += 1
    coverage = covered / len(terms) if terms else 0.0
    missing = [t for t in terms if dfs.get(t, 0) == 0 and t not in corrections]
    return Support(
        round(dense_top, 4),
        round(coverage, 4),
        bool(addressed),
        missing,
        best_coverage=round(best_coverage, 4),
        dense_z=round(null.z(dense_top), 3) if null else None,
        null_mean=null.mean if null else None,
        focus_coverage=round(focus_coverage, 4),
        set_aside=list(focused.set_aside) if focused is not None else [],
    )


def _best_coverage(terms: list[str], dfs: dict[str, int], n_chunks: int, held: list[set[str]]) -> float:
    """The largest share of the terms' IDF weight (a word absent from the collection weighs
    most) that one of the passages' word sets holds."""
    idf = {t: math.log((n_chunks + 1) / (dfs.get(t, 0) + 0.5)) for t in terms}
    weight = sum(idf.values()) or 1.0
    return max((sum(w for t, w in idf.items() if t in h) / weight for h in held), default=0.0)
