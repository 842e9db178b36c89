"""Citebot's benchmarks, one script per measurement; run each from the repository root as
`python -m benchmarks.NAME` (e.g. `.venv/bin/python -m benchmarks.hostile --quick`)."""
