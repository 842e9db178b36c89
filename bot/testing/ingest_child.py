"""An ingest in a process of its own, for fault tests: killed, slowed or run twice at once.

    python -m bot.testing.ingest_child STORE FOLDER [--kill-after-docs N]
        [--kill-in-calibration] [--slow-s S] [--es-url URL --index NAME]

Ingests FOLDER with the test embedder (bot/testing/embedder.py: no model to load) into the
embedded store at STORE, or into Elasticsearch with --es-url. Prints `ready` when it is
about to start and `done {summary json}` at the end; a refused ingest prints
`refused: <message>` and exits 2. The fault options are the embedder's, so the kill lands
at a known point of the run (the store's writes and the embedder's calibration call; the
ingest embeds documents in pools, so the write is where "N documents" is exact):
  --kill-after-docs N     SIGKILL itself when asked to write document N+1 (N documents written)
  --kill-in-calibration   SIGKILL itself when the gate's calibration starts (every document
                          written, the statistics not yet measured again)
  --slow-s S              sleep S seconds per document written (a long run, to overlap another)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from bot.testing.embedder import HashingEmbedder
from search.errors import CitebotError
from search.store import Store


class FaultyEmbedder(HashingEmbedder):
    """The test embedder, killed when the gate's calibration starts, if asked."""

    def __init__(self, kill_in_calibration: bool) -> None:
        super().__init__()
        self.kill_in_calibration = kill_in_calibration

    def encode_texts(self, texts):
        if self.kill_in_calibration:  # the pipeline encodes texts only to calibrate the gate
            os.kill(os.getpid(), signal.SIGKILL)
        return super().encode_texts(texts)


def faulty_writes(store, kill_after_docs: int | None, slow_s: float) -> None:
    """The store's document writes, with a kill before write N+1 or a delay per write."""
    write = store.replace_document
    written = [0]

    def replace_document(*args, **kwargs):
        if kill_after_docs is not None and written[0] >= kill_after_docs:
            os.kill(os.getpid(), signal.SIGKILL)
        written[0] += 1
        if slow_s:
            time.sleep(slow_s)
        return write(*args, **kwargs)

    store.replace_document = replace_document


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("store", type=Path)
    parser.add_argument("folder", type=Path, nargs="+")
    parser.add_argument("--kill-after-docs", type=int)
    parser.add_argument("--kill-in-calibration", action="store_true")
    parser.add_argument("--slow-s", type=float, default=0.0)
    parser.add_argument("--es-url")
    parser.add_argument("--index", default="citebot")
    args = parser.parse_args()
    from ingest.pipeline import ingest

    if args.es_url:
        from search.elastic import ElasticStore, connect

        store: Store = ElasticStore(connect(args.es_url, timeout_s=10), alias=args.index)
    else:
        from search.embedded import EmbeddedStore

        store = EmbeddedStore(args.store)
    embedder = FaultyEmbedder(args.kill_in_calibration)
    faulty_writes(store, args.kill_after_docs, args.slow_s)
    print("ready", flush=True)
    try:
        summary = ingest(args.folder, store, embedder, progress=False)
    except CitebotError as exc:
        print(f"refused: {exc}", flush=True)
        return 2
    finally:
        try:
            store.close()
        except CitebotError as exc:
            print(f"close failed: {exc}", file=sys.stderr, flush=True)
    print("done " + json.dumps(summary.as_json()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
