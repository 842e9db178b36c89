"""Helpers the benchmarks share: the repository's path, the one percentile definition
every latency figure uses, and a process's resident memory."""

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


def rss_bytes(pid: int | str = "self") -> int:
    """A process's resident memory now (VmRSS in /proc), in bytes; 0 when it has none."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0
