"""Chunk statistics of an ingested store: count, median tokens, band share, heading crossings.

A heading crossing is a chunk whose paragraphs are not all paragraphs of the one section
its heading path names (the source is loaded again to check). Run after an ingest:

    CITEBOT_STORE=/tmp/s .venv/bin/citebot ingest examples/handbook
    CITEBOT_STORE=/tmp/s .venv/bin/python benchmarks/chunk_stats.py
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ingest.chunker import BAND_MAX_TOKENS, BAND_MIN_TOKENS, PARAGRAPH_SEPARATOR  # noqa: E402
from ingest.loaders import load  # noqa: E402
from search.embedded import EmbeddedStore  # noqa: E402


def main() -> None:
    store = EmbeddedStore(Path(os.environ.get("CITEBOT_STORE", "~/.local/share/citebot/store")).expanduser())
    chunks = store.iter_chunks()
    if not chunks:
        sys.exit("the store is empty: run citebot ingest first")
    tokens = [c.tokens for c in chunks]
    sections: dict[tuple, list[int]] = defaultdict(list)
    for c in chunks:
        sections[(c.source, c.heading_path)].append(c.tokens)
    long_sections = [t for v in sections.values() if len(v) > 1 for t in v]
    crossings = 0
    paragraphs_by_section: dict[str, dict[tuple, set[str]]] = {}
    for c in chunks:
        if c.source not in paragraphs_by_section:
            doc = load(Path(c.source), c.source)
            paragraphs_by_section[c.source] = {s.heading_path: {p.text for p in s.paragraphs} for s in doc.sections}
        own = paragraphs_by_section[c.source].get(c.heading_path, set())
        if not all(p in own for p in c.text.split(PARAGRAPH_SEPARATOR)):
            crossings += 1
    band = lambda xs: sum(BAND_MIN_TOKENS <= x <= BAND_MAX_TOKENS for x in xs) / max(1, len(xs))  # noqa: E731
    print(f"documents                      {len(paragraphs_by_section)}")
    print(f"chunks                         {len(chunks)}")
    print(f"tokens (all chunks)            {sum(tokens)}")
    print(f"median tokens                  {statistics.median(tokens):.0f}")
    print(f"chunks of split sections       {len(long_sections)} in {sum(1 for v in sections.values() if len(v) > 1)} sections")
    print(f"  share in {BAND_MIN_TOKENS}-{BAND_MAX_TOKENS} tokens       {band(long_sections):.1%}")
    print(f"share in band (all chunks)     {band(tokens):.1%}")
    print(f"heading crossings              {crossings}")


if __name__ == "__main__":
    main()
