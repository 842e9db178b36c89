"""The refusal gate: refuses before composing when retrieval found only weak support.

Refusal is earned, not defaulted: a refusal says why, and the composer (a model) may
still decline what the gate lets through (NOT_COVERED). The gate refuses only when the
evidence is very weak: no rare name or phrase addressed a passage, the best passage is no
closer to the question than questions made of this collection's own words at random are
(search.calibration), and no single top passage holds much of the question's word weight.

How the constants were set (`benchmarks/gate_signals.py` prints every signal per question;
tuned on examples, git, haproxy and sqlite only; the held-out collections were measured
once, afterwards). On the near misses these collections hold (questions whose words all
occur in the collection but which it does not answer) no retrieval signal separates them
from answerable questions: ROC areas on the tuned collections of dense_top 0.46-0.61,
coverage 0.42-0.65, best_coverage 0.24-0.72, and a missing word's own similarity to the
collection separated nothing either. So the gate keeps false refusals down (the earlier
rule, "a question word the collection never uses", refused 36% of git's, 32% of sqlite's
and 20% of haproxy's answerable questions for Slack words such as "nuke", "wtf", "bc")
and leaves the near misses to the model:

    rule (refuse when not addressed and ...)    false refusals              unanswerable refused
                                                examples git haproxy sqlite examples git haproxy sqlite
    the earlier rule (missing word, fixed 0.30) 0.00     0.36 0.20    0.32   0.56     0.17 0.25    0.17
    dense_z < 0                                 0.02     0.08 0.22    0.02   0.31     0.17 0.08    0.00
    dense_z < 0 and best_coverage < 0.35        0.02     0.03 0.07    0.02   0.31     0.08 0.00    0.00
    dense_z < 0.5 and best_coverage < 0.5       0.04     0.17 0.24    0.13   0.38     0.17 0.00    0.33

Held out, measured once with the third row: django 0.04 false refusals and 0.15 of its
unanswerable questions refused, debian-handbook 0.02 and 0.00.

Signals at the level of the answer were measured next and none joined the gate
(`benchmarks/gate_signals.py --split dev --sentences`, dev items of the tuned collections;
the held-out ones read once, afterwards): the question's IDF word weight that one sentence
of the top passages holds, or a sentence with its neighbours; the question's two rarest
words together in one such window; the share of the dense arm's top 5 in the lexical top
5; the best cosine between the question and one sentence. The "ceiling" is what a rule
"signal < t" refuses with t fitted to the collection's own answer key at <= 5% false
refusals, so no per-collection calibration of that signal can do better:

    signal               ROC area (git haproxy sqlite)   ceiling (git haproxy sqlite)
    sentence_coverage    0.22 0.55 0.47                  0.00 0.00 0.00
    window_coverage      0.30 0.49 0.51                  0.00 0.00 0.00
    focus_together       0.48 0.61 0.36                  0.00 0.00 0.00
    arm_agreement        0.53 0.48 0.74                  0.00 0.00 0.00
    sentence_similarity  0.61 0.52 0.76                  0.25 0.00 0.12
    dense_z (this gate)  0.46 0.66 0.68                  0.25 0.00 0.12

On examples/ (written beside the first gate) the coverage signals do separate: ROC 0.80
for sentence_coverage, ceiling 0.56. Paired with dense_z and fitted on the four tuned
collections together, the best rule refused 0.12 of their dev unanswerable questions on
average at <= 5% false refusals on each: one or two questions more than this gate's 0.09,
from a fit to 8-9 questions a collection, so the gate stays as it is. Even fitted to the
held-out answer key itself the best pair reaches 0.26 (sentence_similarity: django 0.31,
debian-handbook 0.21), not the 0.80 asked. A near miss asks for a fact (a limit, a
default, a count, a procedure) about a subject the collection does discuss, so its words
and meaning sit as close to the passages as an answerable question's do; telling the two
apart needs a reader of the passages: the model's NOT_COVERED, or a cross-encoder or NLI
model, which citebot does not ship (search/rerank.py).

Re-measured at the paragraph windows (session 5; `gate_signals.py --collections
examples,git,haproxy,sqlite --split dev`, dev items only), the gate refuses falsely
examples 0.00, git 0.04, haproxy 0.07, sqlite 0.03 of the answerable questions and
refuses 0.22, 0.00, 0.00 and 0.12 of the unanswerable ones; dense_z's ceilings are 0.22,
0.25, 0.12 and 0.00, and the best pair fitted on all four reaches a mean of 0.12
(best_coverage or sentence_coverage). The windows moved single questions across the
edge, not the conclusion, so the constants stay.

A word absent from the collection is reported (Support.missing), never alone a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from search.retrieve import Support

# See the first table above: its third row.
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
