"""One convention for the fuzz pass: hypothesis settings and a per-input time budget.

Every fuzz test (tests/test_fuzz_*.py, marked `fuzz`) draws its inputs with FUZZ_SETTINGS
and runs each one through `within_budget`, so a super-linear path (a backtracking regex,
a quadratic loop) fails the test on the input that triggers it instead of merely slowing
the suite. The whole pass stays under a minute in CI: `scripts/test -m fuzz` runs it alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from hypothesis import HealthCheck, settings

T = TypeVar("T")

# Generous for one input on a loaded 2-core machine, yet a quadratic path on the sizes the
# strategies draw (tens of thousands of characters) takes seconds, far past it.
INPUT_BUDGET_S = 0.5

# Derandomized so a CI run is repeatable; hypothesis's own deadline is off because the
# budget below is measured around the call under test only (not the strategy's drawing).
FUZZ_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def within_budget(call: Callable[[], T], budget_s: float = INPUT_BUDGET_S) -> T:
    """Run call() and fail when it takes longer than budget_s (CPU time of this thread).

    An input over budget is run once more and judged by that run: a one-off cost (the first
    import of a module the path loads lazily, a garbage collection) is not the input's, while
    a super-linear path is over budget every time. The calls fuzzed are pure parsers.
    """
    started = time.thread_time()
    result = call()
    spent = time.thread_time() - started
    if spent > budget_s:
        started = time.thread_time()
        result = call()
        spent = time.thread_time() - started
    assert spent <= budget_s, f"one input took {spent:.2f} s of CPU, over its {budget_s} s budget"
    return result
