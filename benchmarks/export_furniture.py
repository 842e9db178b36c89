"""Confluence furniture left in the chunks of a generated space export.

    .venv/bin/python -m benchmarks.export_furniture [--pages 40]

Writes the test fixture's Confluence export (tests/export_fixtures.py: its two pages, the
index, attachments, icons, and `--pages` more pages, each with its own author and date) to
a temporary folder, chunks it as `citebot ingest FOLDER` would (unzipped) and as an
archive source stages it, and counts the chunks whose text or heading path holds any of
Confluence's furniture (FURNITURE). On a revision without export staging only the first
line is printed: there an archive was extracted as it is, so the folder's figure is the
archive's too (docs/decisions/0039-wiki-exports.md).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.chunk_stats import folder_chunks
from tests.export_fixtures import FURNITURE, confluence_files, make_zip, write_tree


def furniture_share(folder: Path) -> str:
    chunks = folder_chunks(folder)
    bad = [c for c in chunks if any(f in c.text or f in " ".join(c.heading_path) for f in FURNITURE)]
    return (f"{len({c.source for c in chunks})} documents, {len(chunks)} chunks, {len(bad)} with Confluence "
            f"furniture ({len(bad) / max(1, len(chunks)):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=40, help="generated pages besides the fixture's two")
    args = parser.parse_args()
    files = confluence_files(args.pages)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"unzipped folder   {furniture_share(write_tree(root / 'folder', files))}")
        try:
            from ingest.archives import extract_zip
        except ImportError:  # a revision without export staging
            return
        extract_zip(make_zip(root / "export.zip", files), root / "staged")
        print(f"archive, staged   {furniture_share(root / 'staged')}")


if __name__ == "__main__":
    main()
