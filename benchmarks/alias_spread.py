"""How each glossary alias expansion spreads over the collection (the flood rule's input).

For every glossary entry, in both directions: how many chunks the expansion's words
match, the share of all chunks that is, how many documents they fall in, the share the
top document holds, and whether search.retrieve's flood rule leaves it out.

    CITEBOT_STORE=... .venv/bin/python -m benchmarks.alias_spread examples/glossary.csv
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from search.embedded import EmbeddedStore
from search.glossary import Expansion, Glossary
from search.retrieve import Retriever


def main() -> None:
    glossary = Glossary.load(Path(sys.argv[1] if len(sys.argv) > 1 else "examples/glossary.csv"))
    store = EmbeddedStore(Path(os.environ.get("CITEBOT_STORE", "~/.local/share/citebot/store")).expanduser())
    retriever = Retriever(store, lambda q: None, glossary)  # type: ignore[arg-type,return-value]
    total = store.chunk_count()
    print(f"{'found':28} {'expands to':30} {'chunks':>6} {'share':>6} {'docs':>5} {'top doc':>8}  flooded")
    for e in glossary.entries:
        for found, to in ((e.alias, e.term), (e.term, e.alias)):
            spread = retriever.spread(to)
            n = sum(spread.values())
            top = max(spread.values(), default=0)
            flooded = retriever._floods(Expansion(found, to, e))
            print(f"{found[:28]:28} {to[:30]:30} {n:>6} {n / max(1, total):>6.1%} {len(spread):>5} "
                  f"{top / max(1, n):>8.0%}  {'yes' if flooded else ''}")


if __name__ == "__main__":
    main()
