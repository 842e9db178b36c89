"""citebot's application layer: the wiring, settings, logs and command line, over

- bot.slack   — the Slack adapter (listeners, inbound parsing, delivery, thread recall,
                worker pools, HTTP server, dedupe, rate limit, recent turns, rendering);
- bot.answer  — the answer pipeline (turn, gate, composers, prompt, checks, passages);
- bot.memory  — conversation state and the turn log (Redis or in-process);
- bot.testing — local stand-ins and a test embedder, for tests and benchmarks only.

Imports flow downwards only (checked by import-linter, see pyproject.toml):
cli → wiring/evaluate → slack → answer → memory → settings/logs, and bot → ingest → search.
"""

import os

# numpy's OpenBLAS on one thread unless the environment says otherwise (read once, when
# numpy loads, so set here first): its spinning threads slowed the model's next call after
# a large dense scan (docs/decisions/0013-blas-one-thread.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
