"""A sync in a process of its own, for fault tests: killed part-way through its writes.

    python -m bot.testing.sync_child STORE CACHE SOURCES.toml [--kill-after-docs N]

Syncs every source of SOURCES.toml with the test embedder (bot/testing/embedder.py) into
the embedded store at STORE, keeping clones and staged sources in CACHE. With
--kill-after-docs N it SIGKILLs itself when asked to write document N+1 (the ingest
child's fault, bot/testing/ingest_child.py). Prints `done {"sources": [...]}` at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bot.testing.embedder import HashingEmbedder
from bot.testing.ingest_child import faulty_writes


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("cache", type=Path)
    parser.add_argument("sources", type=Path)
    parser.add_argument("--kill-after-docs", type=int)
    args = parser.parse_args()
    from ingest.sources import load_sources
    from ingest.sync import sync
    from search.embedded import EmbeddedStore

    store = EmbeddedStore(args.store)
    faulty_writes(store, args.kill_after_docs, 0.0)
    reports = sync(load_sources(args.sources), store, HashingEmbedder(), args.cache, progress=False)
    store.close()
    print("done " + json.dumps({"sources": [r.as_json() for r in reports]}), flush=True)
    return 1 if any(r.error for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
