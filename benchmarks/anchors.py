"""How many sections of real HTML get an anchor, and whether each anchor exists in its page.

Loads every HTML page of the folders given as ingest would (ingest/loaders/html.py) and counts,
per folder: pages, pages with a canonical address, sections (chunks never span two), the
text before a page's first heading (it links to the page itself), and of the sections under
a heading: those whose heading has an anchor of its own, those that take an enclosing
heading's, those with none; and anchors that name no id or <a name> of the page (a link that would
land at the top of the page instead; this should be 0). Reads files only:

    .venv/bin/python -m benchmarks.anchors ~/.cache/citebot/collections/django/docs [...]

(the collections' documents are fetched by benchmarks/labelled.py, never committed).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from ingest.loaders import load
from search.errors import IngestError

_IDS = re.compile(r"""\b(?:id|name)\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)


def measure(folder: Path) -> dict:
    pages = canonical = sections = untitled = own = inherited = none = missing = 0
    for path in sorted(folder.rglob("*.htm*")):
        try:
            doc = load(path, path.relative_to(folder).as_posix())
        except IngestError:
            continue
        pages += 1
        canonical += doc.url is not None
        ids = set(_IDS.findall(path.read_text(encoding="utf-8", errors="replace")))
        parent: dict[tuple[str, ...], str | None] = {}
        for s in doc.sections:
            sections += 1
            parent[s.heading_path] = s.anchor
            above = parent.get(s.heading_path[:-1]) if len(s.heading_path) > 1 else None
            if not s.heading_path:
                untitled += 1
            elif s.anchor is None:
                none += 1
            elif s.anchor == above:
                inherited += 1
            else:
                own += 1
            if s.anchor is not None and s.anchor not in ids:
                missing += 1
    return {"folder": str(folder), "pages": pages, "canonical": canonical, "sections": sections,
            "before_any_heading": untitled, "own_anchor": own, "enclosing_anchor": inherited, "no_anchor": none,
            "anchor_not_in_page": missing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    for folder in args.folders:
        row = measure(folder)
        if args.json:
            print(json.dumps(row))
            continue
        n = max(1, row["sections"] - row["before_any_heading"])
        print(f"{folder}: {row['pages']} pages ({row['canonical']} canonical), {row['sections']} sections, "
              f"{row['before_any_heading']} before any heading; under a heading: "
              f"own anchor {row['own_anchor'] / n:.1%}, enclosing heading's {row['enclosing_anchor'] / n:.1%}, "
              f"none {row['no_anchor'] / n:.1%}; anchors not in their page: {row['anchor_not_in_page']}")


if __name__ == "__main__":
    main()
