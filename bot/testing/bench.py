"""Pieces the benchmarks and the fault tests share: the sample handbook ingested with the
test embedder (the benchmarks' percentile is benchmarks/common.py's)."""

from __future__ import annotations

from pathlib import Path

HANDBOOK = Path(__file__).resolve().parents[2] / "examples" / "handbook"


def ingest_handbook(into: Path, embedder=None):
    """The sample handbook ingested into an embedded store at `into` (the test embedder by
    default: under a second, no model); returns the ingest summary."""
    from search.embedded import EmbeddedStore

    return ingest_handbook_into(EmbeddedStore(into), embedder)


def ingest_handbook_into(store, embedder=None):
    """The sample handbook ingested into `store` (any Store; closed afterwards) with the test
    embedder by default; returns the ingest summary."""
    from bot.testing.embedder import HashingEmbedder
    from ingest.pipeline import ingest

    try:
        return ingest([HANDBOOK], store, embedder if embedder is not None else HashingEmbedder(), progress=False)
    finally:
        store.close()
