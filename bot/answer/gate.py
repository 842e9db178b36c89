"""The refusal gate: refuses before composing when retrieval found only weak support.

Refusal is earned, not defaulted: a refusal says why, and the composer (a model) may
still decline what the gate lets through (NOT_COVERED). The gate refuses only when the
evidence is very weak: no rare name or phrase addressed a passage, the best passage is no
closer to the question than questions made of this collection's own words at random are
(search.calibration), and no single top passage holds much of the question's word weight.

The rules were set with `benchmarks/gate_signals.py` on the tuned collections' dev items;
the tables, ROC areas and held-out figures are in docs/decisions/0005-refusal-gate.md
(signals at the level of the answer, measured and dropped: 0006-answer-level-gate-signals.md).

A word absent from the collection is reported (Support.missing), never alone a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from search.support import Support

# Together: false refusals 2-7% on each tuned collection (docs/decisions/0005-refusal-gate.md).
GATE_Z_MAX = 0.0
GATE_BEST_COVERAGE_MAX = 0.35
# Too few chunks to calibrate: the first gate's floor (docs/decisions/0005-refusal-gate.md).
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
