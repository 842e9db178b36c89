"""The refusal gate: refuses before composing when retrieval found no adequate support.

Refusal is earned, not defaulted: a refusal says why, and the composer (a model) may
still decline what the gate lets through.
"""

from __future__ import annotations

from dataclasses import dataclass

from search.retrieve import Support

# The refusal gate. Set on the 43 dev questions of examples/questions.jsonl (signals
# printed by `citebot eval --json`: support.dense_top, coverage, missing), checked on
# the held-out part, never tuned there:
# - A content word of the question that the collection never uses ("kubernetes",
#   "parental", "gym") means the collection lacks the concept: 6 of 9 dev unanswerables
#   have one, no dev answerable does. Answer anyway when a passage is very close
#   (dense_top >= GATE_MISSING_DENSE_MAX; the closest unanswerable had 0.70) or holds most
#   of the question's words (coverage >= GATE_MISSING_COVERAGE_MAX; unanswerables <= 0.60),
#   so one unusual word in a paraphrase ("my Uber") does not cost an answer.
# - Nothing close at all: below GATE_DENSE_MIN (the lowest answerable dev question that no
#   name or phrase addressed had 0.32) with under half the words found.
GATE_MISSING_DENSE_MAX = 0.72
GATE_MISSING_COVERAGE_MAX = 0.80
GATE_DENSE_MIN = 0.30
GATE_COVERAGE_MIN = 0.50


@dataclass(frozen=True)
class Gate:
    """Refuses before composing when retrieval found no adequate support."""

    missing_dense_max: float = GATE_MISSING_DENSE_MAX
    missing_coverage_max: float = GATE_MISSING_COVERAGE_MAX
    dense_min: float = GATE_DENSE_MIN
    coverage_min: float = GATE_COVERAGE_MIN

    def refuse(self, support: Support) -> str | None:
        """A reason to refuse, or None when retrieval found adequate support."""
        if support.addressed:
            return None
        if (support.missing and support.dense_top < self.missing_dense_max
                and support.coverage < self.missing_coverage_max):
            words_ = ", ".join(f"'{w}'" for w in support.missing)
            return (f"the collection never mentions {words_}, and no passage is close to the "
                    f"question (best similarity {support.dense_top:.2f})")
        if support.dense_top < self.dense_min and support.coverage < self.coverage_min:
            return (f"no passage is close to the question (best similarity "
                    f"{support.dense_top:.2f}; {support.coverage:.0%} of its words found)")
        return None
