"""Helpers the benchmarks share: the repository's path and the one percentile definition
every latency figure uses."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by numpy's default linear interpolation between the
    closest ranks; NaN for no values."""
    # numpy imported here, not at the top: a benchmark importing this module before bot must
    # not load numpy before bot/__init__.py has set its BLAS threads.
    import numpy as np

    if len(values) == 0:
        return float("nan")
    return float(np.percentile(values, q))
