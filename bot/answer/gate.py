"""The refusal gate: three outcomes, judged before composing from the retrieval's support.

- **answer**: a rare name or phrase addressed a passage, or the best passage is close to
  the question (at least as close as questions of this collection's own words at random
  are: search.calibration), or one top passage holds much of the question's word weight;
- **closest**: none of that, but the best passage is on topic: not far below that null, or
  holding a fair share of the question's content. The answer is composed and checked as
  usual and labelled plainly: the documents may not answer this directly, this is the
  closest they come;
- **refused**: nothing in the collection touches the question; the flat refusal.

Word weight is read on the question's content (search.focus: a Slack preamble, greetings
and filler set aside) or as written, whichever the passages cover more. The composer (a
model) may still decline what the gate lets through (NOT_COVERED). The rules were set with
`benchmarks/gate_signals.py` on the tuned collections' dev items; the figures are in
docs/decisions/0033-three-outcome-gate.md (the two-outcome gate before it:
0005-refusal-gate.md; answer-level signals, measured and dropped: 0006).

A word absent from the collection is reported (Support.missing), never alone a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from search.support import Support

ANSWER, CLOSEST, REFUSED = "answer", "closest", "refused"
OUTCOMES = (ANSWER, CLOSEST, REFUSED)
# What a "closest" answer opens with, wherever it is shown.
CLOSEST_LABEL = "The documents may not answer this directly. The closest they come:"

# Answer outright (docs/decisions/0005-refusal-gate.md, kept: 0033-three-outcome-gate.md).
GATE_Z_MAX = 0.0
GATE_BEST_COVERAGE_MAX = 0.35
# Too few chunks to calibrate: the first gate's floor (docs/decisions/0005-refusal-gate.md).
GATE_DENSE_MIN_UNCALIBRATED = 0.30
# On topic, so "closest" rather than refused: set across the tuned collections, one rule
# for all, at most 5% of answerable questions flatly refused on each
# (docs/decisions/0033-three-outcome-gate.md).
CLOSEST_Z_MIN = -1.5
CLOSEST_COVERAGE_MIN = 0.2
# The edges above were set on all-MiniLM-L6-v2's cosines. all-mpnet-base-v2 (the optional
# second model) puts near misses further above its own null: at 0.0 it answered more of the
# tuned collections' unanswerable dev questions outright; at 0.5 no more than MiniLM does,
# with no answerable question refused (docs/decisions/0060-mpnet-on-every-collection.md).
GATE_Z_MAX_BY_MODEL = {"sentence-transformers/all-mpnet-base-v2": 0.5}


@dataclass(frozen=True)
class Verdict:
    """The gate's outcome and, unless it is ANSWER, why."""

    outcome: str
    reason: str | None = None


@dataclass(frozen=True)
class Gate:
    """Judges before composing whether retrieval found support, some, or none."""

    z_max: float = GATE_Z_MAX
    best_coverage_max: float = GATE_BEST_COVERAGE_MAX
    dense_min_uncalibrated: float = GATE_DENSE_MIN_UNCALIBRATED
    closest_z_min: float = CLOSEST_Z_MIN
    closest_coverage_min: float = CLOSEST_COVERAGE_MIN

    @classmethod
    def for_model(cls, model: str) -> Gate:
        """The gate for a store of this embedding model (the index stamp's name); a model
        without edges of its own gets all-MiniLM-L6-v2's."""
        return cls(z_max=GATE_Z_MAX_BY_MODEL.get(model, GATE_Z_MAX))

    def judge(self, support: Support) -> Verdict:
        if support.addressed or support.evidence >= self.best_coverage_max:
            return Verdict(ANSWER)
        if support.dense_z is None:
            close = support.dense_top >= self.dense_min_uncalibrated
            near = False
        else:
            close = support.dense_z >= self.z_max
            near = support.dense_z >= self.closest_z_min
        if close:
            return Verdict(ANSWER)
        baseline = (
            f", against {support.null_mean:.2f} for questions of random words of this collection"
            if support.null_mean is not None
            else ""
        )
        measured = (
            f"best similarity {support.dense_top:.2f}{baseline}; "
            f"{support.evidence:.0%} of its word weight in the best passage"
        )
        if near or support.evidence >= self.closest_coverage_min:
            return Verdict(CLOSEST, f"the passages are on the topic but none is close to the question ({measured})")
        return Verdict(REFUSED, f"nothing in the collection is near the question ({measured})")

    def refuse(self, support: Support) -> str | None:
        """A reason to refuse flatly, or None when the question is answered or gets the
        closest the documents come."""
        verdict = self.judge(support)
        return verdict.reason if verdict.outcome == REFUSED else None
