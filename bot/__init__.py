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

# numpy's OpenBLAS on one thread, unless the environment says otherwise (read once, when
# numpy loads, so it is set here, before anything imports numpy). A large matrix product,
# such as the embedded store's dense scan of a 10,000-chunk collection, otherwise starts
# a thread per core that keeps spinning after it and slows the model's next call: on the
# rust-doc corpus (10,001 chunks, 2 cores) a turn's p50 was 155-176 ms with OpenBLAS on
# both cores and 94-102 ms on one, compose 133-153 ms against 81-89; the scan itself is
# about 15% slower on one thread (1.8 against 1.55 ms), and on the sample handbook the
# turn is within 3% either way (benchmarks/blas_threads.py).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
