"""The refusal gate: refuses before composing when retrieval found only weak support.

Refusal is earned, not defaulted: a refusal says why, and the composer (a model) may
still decline what the gate lets through (NOT_COVERED). The gate refuses only when the
evidence is very weak: no rare name or phrase addressed a passage, the best passage is no
closer to the question than questions made of this collection's own words at random are
(search.calibration), and no single top passage holds much of the question's word weight.

How the constants were set (benchmarks/gate_signals.py prints every signal per question;
tuned collections only: examples, git, haproxy; the held-out collections were measured
once, afterwards). On the near misses these collections hold — questions whose words all
occur in the collection but which it does not answer — no retrieval signal separates
them from answerable questions: area under the ROC curve of dense_top 0.43-0.60, of
coverage 0.45-0.78, of best_coverage 0.45-0.86, of a missing word's own similarity to the
collection none. So the gate keeps false refusals down (the earlier rule, "a question word
the collection never uses", refused 36% of git's and 20% of haproxy's answerable questions
for Slack words such as "nuke", "wtf", "bc") and leaves the near misses to the model:

    rule (refuse when not addressed and …)        false refusals        unanswerable refused
                                                  examples git haproxy  examples git haproxy
    the earlier rule (missing word, fixed 0.30)   0.00     0.36 0.20    0.56     0.17 0.25
    dense_z < 0                                   0.02     0.06 0.17    0.31     0.08 0.08
    dense_z < 0 and best_coverage < 0.35          0.00     0.03 0.04    0.31     0.08 0.00
    dense_z < 0.5 and best_coverage < 0.5         0.07     0.08 0.20    0.38     0.17 0.00

A word absent from the collection is reported (Support.missing), never alone a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from search.retrieve import Support

# See the table above: the second-last row.
GATE_Z_MAX = 0.0
GATE_BEST_COVERAGE_MAX = 0.35
# A collection too small for a null distribution (fewer than two chunks with words):
# the fixed floor of the first gate (the lowest answerable sample question had 0.32).
GATE_DENSE_MIN_UNCALIBRATED = 0.30


@dataclass(frozen=True)
class Gate:
    """Refuses before composing when retrieval found no adequate support."""

    z_max: float = GATE_Z_MAX
    best_coverage_max: float = GATE_BEST_COVERAGE_MAX
    dense_min_uncalibrated: float = GATE_DENSE_MIN_UNCALIBRATED

    def refuse(self, support: Support) -> str | None:
        """A reason to refuse, or None when retrieval found adequate support."""
        if support.addressed:
            return None
        if support.best_coverage >= self.best_coverage_max:
            return None
        if support.dense_z is None:
            close = support.dense_top >= self.dense_min_uncalibrated
        else:
            close = support.dense_z >= self.z_max
        if close:
            return None
        baseline = (f", no closer than questions of random words of this collection "
                    f"({support.null_mean:.2f})" if support.null_mean is not None else "")
        return (f"no passage is close to the question (best similarity {support.dense_top:.2f}"
                f"{baseline}) and none holds much of what it asks about "
                f"({support.best_coverage:.0%} of its word weight)")
