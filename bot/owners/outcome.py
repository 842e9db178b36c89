"""Which turns citebot did not answer well, and how: the gaps report's outcomes.

A turn's outcome, first that applies:

- "refused": the gate or the model declined (record `refused`, `refusal_stage`);
- "failed_check": an answer whose checks failed (`unsupported`, a citation that did not
  resolve to a passage given, a quotation not found in its passage, a claim the judge
  found unsupported);
- "voted_down": someone clicked the answer's thumbs-down;
- "weak": an extractive answer on weak evidence: a "closest" answer (the gate's outcome
  field, where recorded), or one the gate let through on thin support (see WEAK_*).

A turn that failed (record `error`) is the service's failure, not a gap in the
documents, and has no outcome here. Records are read defensively: fields a version did
not write are absent, never an error.
"""

from __future__ import annotations

from typing import Any

REFUSED, FAILED_CHECK, VOTED_DOWN, WEAK = "refused", "failed_check", "voted_down", "weak"
OUTCOMES = (REFUSED, FAILED_CHECK, VOTED_DOWN, WEAK)
# The thumbs-down button's value (bot/slack/render.py FEEDBACK_VALUES; a test holds them equal).
DOWN_VOTES = frozenset({"not_helpful"})

# Weak evidence: the gate's own signals with a margin above its refusal line
# (bot/answer/gate.py: z 0.0, best coverage 0.35): a passage barely closer than random
# words and holding under half of the question's word weight, nothing addressed by name
# (docs/decisions/0036-gaps-report.md). all-mpnet-base-v2's gate edge is 0.5; 1.0 still
# flags every gap turn its gate lets through (docs/decisions/0065-model-tied-constants.md).
WEAK_Z_MAX = 1.0
WEAK_BEST_COVERAGE_MAX = 0.5
WEAK_DENSE_MAX_UNCALIBRATED = 0.45


def _weak_support(support: dict[str, Any]) -> bool:
    if not support or support.get("addressed"):
        return False
    if float(support.get("best_coverage") or 0.0) >= WEAK_BEST_COVERAGE_MAX:
        return False
    z = support.get("dense_z")
    if z is None:
        return float(support.get("dense_top") or 0.0) < WEAK_DENSE_MAX_UNCALIBRATED
    return float(z) < WEAK_Z_MAX


def failed_check(record: dict[str, Any]) -> bool:
    if record.get("unsupported"):
        return True
    if any(not (c.get("resolved") and c.get("retrieved", True)) for c in record.get("citations") or []):
        return True
    if any(not q.get("verified") for q in record.get("quotes") or []):
        return True
    claims = record.get("claims") or {}
    return bool(claims.get("unsupported"))


def voted_down(record: dict[str, Any]) -> bool:
    """The person's latest vote counts (a vote may be changed)."""
    latest: dict[Any, str] = {}
    for f in record.get("feedback") or []:
        latest[f.get("user")] = str(f.get("value") or "")
    return any(v in DOWN_VOTES for v in latest.values())


def outcome_of(record: dict[str, Any]) -> str | None:
    """The turn's outcome for the gaps report, or None when it was answered well."""
    if record.get("error"):
        return None
    if record.get("refused") or record.get("outcome") == "refused":
        return REFUSED
    if failed_check(record):
        return FAILED_CHECK
    if voted_down(record):
        return VOTED_DOWN
    if record.get("outcome") == "closest":
        return WEAK
    if record.get("composer") == "extractive" and _weak_support(record.get("support") or {}):
        return WEAK
    return None
