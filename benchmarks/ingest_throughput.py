"""Ingest throughput beside the raw encode rate of the embedding model, which bounds it.

    raw encode   Embedder.encode_texts on full 256-token windows (254 + [CLS] + [SEP])
    ingest       `ingest examples/handbook` end to end (load, chunk, window, embed, write)
                 into a fresh embedded store and a fresh Elasticsearch alias
    store write  the same chunks and vectors written again without embedding: the
                 backend's own share of an ingest
    large corpus the ingest that built the cached 10,000+ chunk corpus (benchmarks/corpus.py),
                 when built; with --large, a fresh timed ingest of it (tens of minutes)

Figures: chunks/s, tokens/s (model tokens of the stored chunk text) and windows/s, and
each ingest's rates as shares of the raw encode rate. Windows are what the model
encodes: overlapping 256-token windows with the heading path in front, so a window/s
share near 100% means the ingest runs as fast as the model can.

    eval "$(scripts/services start)"
    .venv/bin/python benchmarks/ingest_throughput.py [--large] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus

from ingest.embedder import Embedder
from ingest.pipeline import ingest
from search.elastic import ElasticStore, connect
from search.embedded import DB_NAME, EmbeddedStore

ENCODE_WINDOWS = 128  # four of the embedder's batches of 32


def raw_encode(embedder: Embedder) -> dict[str, float]:
    """Windows of exactly the model's width cut from the handbook text, encoded in batches."""
    text = "\n\n".join(p.read_text(encoding="utf-8", errors="replace")
                       for p in sorted((corpus.REPO / "examples" / "handbook").rglob("*.md")))
    ids = embedder.tokenizer(text, add_special_tokens=False)["input_ids"]
    width = embedder.max_tokens
    windows: list[str] = []
    start = 0
    while len(windows) < ENCODE_WINDOWS:
        piece = embedder.tokenizer.decode(ids[start : start + width])
        while embedder.count_tokens(piece) > width:  # decoding can merge or split a token
            piece = piece[: int(len(piece) * 0.98)]
        windows.append(piece)
        start = (start + width) % max(1, len(ids) - width)
    tokens = sum(embedder.count_tokens(w) for w in windows)
    embedder.encode_texts(windows[:32])  # warm
    started = time.perf_counter()
    embedder.encode_texts(windows)
    seconds = time.perf_counter() - started
    return {"windows": len(windows), "tokens": tokens, "seconds": round(seconds, 2),
            "windows_per_s": round(len(windows) / seconds, 2),
            "tokens_per_s": round(tokens / seconds, 1)}


def rates(chunks: int, tokens: int, windows: int, seconds: float) -> dict[str, float]:
    return {"chunks": chunks, "tokens": tokens, "windows": windows, "seconds": round(seconds, 2),
            "chunks_per_s": round(chunks / seconds, 2), "tokens_per_s": round(tokens / seconds, 1),
            "windows_per_s": round(windows / seconds, 2)}


def window_count(store: EmbeddedStore) -> int:
    """Embedding windows of an embedded store (the same chunking gives the same windows)."""
    db = sqlite3.connect(store.directory / DB_NAME)
    try:
        return int(db.execute("SELECT count(*) FROM windows").fetchone()[0])
    finally:
        db.close()


def ingest_into(store, embedder: Embedder, windows: int | None = None) -> dict[str, float]:
    cwd = os.getcwd()
    os.chdir(corpus.REPO)
    try:
        summary = ingest([corpus.REPO / "examples" / "handbook"], store, embedder, progress=False)
    finally:
        os.chdir(cwd)
    tokens = sum(c.tokens for c in store.iter_chunks())
    if windows is None:
        windows = window_count(store)
    return rates(summary.chunks, tokens, windows, summary.seconds)


def fresh_elastic(timeout_s: float = 120) -> ElasticStore:
    return ElasticStore(connect(corpus.elastic_url(), timeout_s=timeout_s),
                        alias=f"citebot-bench-ingest-{uuid.uuid4().hex[:8]}")


def drop(store: ElasticStore) -> None:
    found = store.es.indices.get(index=f"{store.alias}-v*", allow_no_indices=True)
    for name in found:
        store.es.indices.delete(index=name)


def large_ingest(embedder: Embedder) -> dict[str, float]:
    pages, _ = corpus.select_pages(embedder)
    with tempfile.TemporaryDirectory() as tmp:
        store = EmbeddedStore(Path(tmp) / "store")
        summary = ingest(pages, store, embedder, progress=False, within=corpus.CACHE)
        tokens = sum(c.tokens for c in store.iter_chunks())
        return rates(summary.chunks, tokens, window_count(store), summary.seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true",
                        help="also ingest the 10,000+ chunk corpus afresh (tens of minutes)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = Embedder()
    out: dict[str, Any] = {"raw_encode": raw_encode(embedder)}
    with tempfile.TemporaryDirectory() as tmp:
        embedded = EmbeddedStore(Path(tmp) / "store")
        out["ingest_embedded"] = ingest_into(embedded, embedder)
        es = fresh_elastic()
        try:
            out["ingest_elasticsearch"] = ingest_into(es, embedder, window_count(embedded))
            tokens = out["ingest_embedded"]["tokens"]
            again = EmbeddedStore(Path(tmp) / "again")
            windows = window_count(embedded)
            out["write_embedded"] = rates(embedded.chunk_count(), tokens, windows,
                                          corpus.copy_into(embedded, again))
            es2 = fresh_elastic()
            try:
                out["write_elasticsearch"] = rates(embedded.chunk_count(), tokens, windows,
                                                   corpus.copy_into(embedded, es2))
            finally:
                drop(es2)
        finally:
            drop(es)
    done = corpus.CACHE / "embedded.json"
    if done.exists():
        summary = json.loads(done.read_text())
        big = EmbeddedStore(corpus.CACHE / "embedded")
        tokens = sum(c.tokens for c in big.iter_chunks())
        out["ingest_large_corpus_embedded"] = rates(summary["chunks"], tokens, window_count(big),
                                                    summary["seconds"])
    if args.large:
        out["ingest_large_corpus_fresh"] = large_ingest(embedder)
    raw = out["raw_encode"]
    for key, value in out.items():
        if key.startswith("ingest_"):
            value["tokens_share_of_raw_encode"] = round(value["tokens_per_s"] / raw["tokens_per_s"], 3)
            value["windows_share_of_raw_encode"] = round(
                value["windows_per_s"] / raw["windows_per_s"], 3)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    r = out["raw_encode"]
    print(f"raw encode: {r['windows_per_s']} windows/s, {r['tokens_per_s']} tokens/s "
          f"({r['windows']} windows of {r['tokens'] // r['windows']} tokens)")
    for key, v in out.items():
        if key == "raw_encode":
            continue
        share = (f"; of raw encode: {v['tokens_share_of_raw_encode']:.0%} of tokens/s, "
                 f"{v['windows_share_of_raw_encode']:.0%} of windows/s"
                 if "tokens_share_of_raw_encode" in v else "")
        print(f"{key:29} {v['chunks']:>6} chunks in {v['seconds']:>7.1f} s: "
              f"{v['chunks_per_s']:>8.2f} chunks/s, {v['tokens_per_s']:>9.1f} tokens/s, "
              f"{v['windows_per_s']:>8.2f} windows/s{share}")


if __name__ == "__main__":
    main()
