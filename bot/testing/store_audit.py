"""What a store holds, and whether it is whole: the checks of the fault suite.

`collection()` reads a store as {source: its chunks}, comparable across stores and
backends (ids, order, text, headings, pages). `audit_embedded()` checks an embedded
store's SQLite file from the inside: integrity, every chunk indexed for words and
vectors exactly once, no orphans. `versions()` says, per source, which of two reference
collections a store holds: after an interrupted ingest each document must be the old
version or the new one, whole, never a mix.

`edit_collection()` turns a copy of a folder into its "next version" deterministically:
some files changed, some deleted, some added (an ingest that writes, deletes and adds).
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

from search.store import Store

ChunkKey = tuple[str, int, str, tuple[str, ...], str | None]  # chunk_id, ordinal, text, heading, page


def collection(store: Store) -> dict[str, tuple[ChunkKey, ...]]:
    """Every source's chunks, in order."""
    out: dict[str, list[ChunkKey]] = {}
    for c in store.iter_chunks():
        out.setdefault(c.source, []).append((c.chunk_id, c.ordinal, c.text, tuple(c.heading_path), c.page))
    return {s: tuple(sorted(v, key=lambda k: k[1])) for s, v in out.items()}


def duplicated_chunks(store: Store) -> list[str]:
    """Chunk ids the store holds more than once (must be none)."""
    counts = Counter(c.chunk_id for c in store.iter_chunks())
    return sorted(k for k, n in counts.items() if n > 1)


def audit_embedded(directory: Path) -> list[str]:
    """Problems of an embedded store's database ([] when whole)."""
    from search.embedded import DB_NAME

    db = sqlite3.connect(Path(directory) / DB_NAME)
    try:
        problems = []
        (integrity,) = db.execute("PRAGMA integrity_check").fetchone()
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
        checks = {
            "chunks without their document": "SELECT count(*) FROM chunks c LEFT JOIN documents d"
            " ON c.doc_id = d.doc_id WHERE d.doc_id IS NULL",
            "documents without chunks": "SELECT count(*) FROM documents d WHERE NOT EXISTS"
            " (SELECT 1 FROM chunks c WHERE c.doc_id = d.doc_id)",
            "chunks without a vector": "SELECT count(*) FROM chunks c WHERE NOT EXISTS"
            " (SELECT 1 FROM windows w WHERE w.chunk_rowid = c.id)",
            "vectors of no chunk": "SELECT count(*) FROM windows w LEFT JOIN chunks c"
            " ON c.id = w.chunk_rowid WHERE c.id IS NULL",
            "chunks not in the word index": "SELECT count(*) FROM chunks c WHERE c.id NOT IN"
            " (SELECT rowid FROM chunks_fts)",
            "word index rows of no chunk": "SELECT count(*) FROM chunks_fts WHERE rowid NOT IN (SELECT id FROM chunks)",
            "duplicated chunk positions": "SELECT count(*) FROM (SELECT 1 FROM chunks"
            " GROUP BY doc_id, ordinal HAVING count(*) > 1)",
        }
        for what, sql in checks.items():
            (n,) = db.execute(sql).fetchone()
            if n:
                problems.append(f"{what}: {n}")
        return problems
    finally:
        db.close()


def versions(held: dict[str, tuple], old: dict[str, tuple], new: dict[str, tuple]) -> dict[str, str]:
    """Per source of any of the three: "old", "new", "both" (unchanged), "absent" or "MIXED"."""
    out = {}
    for source in sorted(set(held) | set(old) | set(new)):
        chunks = held.get(source)
        if chunks is None:
            out[source] = "absent"
        elif chunks == old.get(source) and chunks == new.get(source):
            out[source] = "both"
        elif chunks == old.get(source):
            out[source] = "old"
        elif chunks == new.get(source):
            out[source] = "new"
        else:
            out[source] = "MIXED"
    return out


def edit_collection(
    folder: Path, seed: int = 0, *, changed: int = 4, deleted: int = 2, added: int = 2
) -> dict[str, list[str]]:
    """Change, delete and add Markdown files of `folder` in place; what was done, by kind."""
    rng = random.Random(seed)
    files = sorted(p for p in folder.rglob("*.md") if p.is_file())
    picked = rng.sample(files, changed + deleted)
    done: dict[str, list[str]] = {"changed": [], "deleted": [], "added": []}
    for i, path in enumerate(picked[:changed]):
        path.write_text(
            path.read_text(encoding="utf-8")
            + (
                f"\n\n## Revision note {seed}-{i}\n\nThis section was added by revision {seed} of the "
                f"collection: the fault suite checks that it is ingested whole or not at all.\n"
            ),
            encoding="utf-8",
        )
        done["changed"].append(path.relative_to(folder).as_posix())
    for path in picked[changed:]:
        path.unlink()
        done["deleted"].append(path.relative_to(folder).as_posix())
    for i in range(added):
        path = folder / f"added-{seed}-{i}.md"
        path.write_text(
            f"# Added page {i}\n\nRevision {seed} added this page about the quarterly lantern inspection number {i}.\n",
            encoding="utf-8",
        )
        done["added"].append(path.name)
    return done


def copy_folder(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target
