"""The ingest pipeline: files in, chunks and stamped vectors written to a store.

Idempotent: a file whose content hash is already stored is skipped, a changed one is
replaced whole (in one store transaction), a file that disappeared from an ingested
folder is deleted. One bad file is reported as skipped with its reason and never
aborts the run.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ingest.chunker import ChunkingConfig, chunk_document, doc_id_for
from ingest.embedder import Embedder
from ingest.loaders import FORMATS, load
from search import calibration
from search.errors import IngestError
from search.store import Store
from search.types import DocumentRecord


@dataclass
class Skipped:
    source: str
    reason: str


@dataclass
class IngestSummary:
    documents: int = 0  # documents written (new or changed)
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0  # chunks written in this run
    skipped: list[Skipped] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict:
        return {
            "documents": self.documents, "unchanged": self.unchanged, "deleted": self.deleted,
            "chunks": self.chunks, "skipped": [{"source": s.source, "reason": s.reason} for s in self.skipped],
            "seconds": round(self.seconds, 3),
        }


def source_name(path: Path) -> str:
    """How a file is named in the store: relative to the working directory when inside it."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def discover(paths: Iterable[Path]) -> Iterator[tuple[Path, Path | None]]:
    """(file, the folder it was found under or None), hidden files and folders left out."""
    for root in paths:
        if root.is_dir():
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in sorted(filenames):
                    if not name.startswith("."):
                        yield Path(dirpath) / name, root
        else:
            yield root, None


def ingest(
    paths: Iterable[Path],
    store: Store,
    embedder: Embedder,
    *,
    chunking: ChunkingConfig | None = None,
    progress: bool | None = None,
) -> IngestSummary:
    """Ingest files and folders into the store; see the module docstring."""
    from tqdm import tqdm

    started = time.perf_counter()
    summary = IngestSummary()
    store.open_for(embedder.stamp)
    stored = store.document_hashes()
    paths = [Path(p) for p in paths]
    files = list(discover(paths))
    seen: set[str] = set()
    show = sys.stderr.isatty() if progress is None else progress
    bar = tqdm(files, unit="file", disable=not show, file=sys.stderr, desc="ingest")
    for path, _root in bar:
        source = source_name(path)
        seen.add(source)
        try:
            if not path.exists():
                raise IngestError(f"{source}: no such file")
            if path.suffix.lower() not in FORMATS:
                raise IngestError(f"{source}: unsupported format {path.suffix or '(no extension)'!r}")
            content_hash = hashlib.sha256(path.read_bytes()).hexdigest()
            if stored.get(source) == content_hash:
                summary.unchanged += 1
                continue
            doc = load(path, source)
            doc_id = doc_id_for(source)
            chunks = chunk_document(doc, doc_id, embedder.count_tokens, chunking)
            windows = embedder.embed_chunks(chunks)
            store.replace_document(
                DocumentRecord(doc_id, source, content_hash, doc.title, doc.format), chunks, windows
            )
        except IngestError as exc:
            summary.skipped.append(Skipped(source, str(exc).removeprefix(f"{source}: ")))
            continue
        except OSError as exc:
            summary.skipped.append(Skipped(source, f"unreadable ({exc.strerror or exc})"))
            continue
        summary.documents += 1
        summary.chunks += len(chunks)
        bar.set_postfix(chunks=summary.chunks)
    # Files that were ingested from these folders before and are gone now.
    folders = [source_name(p) for p in paths if p.is_dir()]
    gone = [
        s for s in stored
        if s not in seen and any(s == f or s.startswith(f.rstrip("/") + "/") or f == "." for f in folders)
        and not Path(s).exists()
    ]
    if gone:
        store.delete_documents(gone)
        summary.deleted = len(gone)
    store.commit_ingest()
    recalibrate(store, embedder, changed=bool(summary.documents or summary.deleted))
    summary.seconds = time.perf_counter() - started
    return summary


def recalibrate(store: Store, embedder: Embedder, *, changed: bool) -> None:
    """The refusal gate's calibration, stored with the collection (search.calibration):
    measured again whenever the collection changed, or when it has none yet."""
    if store.chunk_count() == 0:
        return
    if changed or calibration.stored(store) is None:
        calibration.calibrate(store, embedder.encode_texts)
