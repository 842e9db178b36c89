"""The ingest pipeline: files in, chunks and stamped vectors written to a store.

Idempotent: a file whose content hash is already stored is skipped, a changed one is
replaced whole (in one store transaction), a file that disappeared from an ingested
folder is deleted. One bad file is reported as skipped with its reason and never
aborts the run.

Names. A file found in an ingested folder is named by its path relative to that folder
(`citebot ingest examples/handbook` stores `company/values.md`); a file named on the
command line by its file name, unless the store already holds it under the name an
ingested folder gave it. Each stored document remembers the folder its name is
relative to (its origin, kept with the content hash), so that:

- re-ingesting a folder finds its documents, and deletes those whose files are gone;
- a file of another folder with the same relative name never replaces a stored one
  while that one's file still exists: it is skipped with a reason that says what to do
  (ingest that folder into a store of its own); once the stored file is gone (the
  folder moved), the new one takes its name;
- a document stored by an earlier version under a path relative to the working
  directory is renamed when its folder is ingested again.

Addresses: a document's own URL (front matter, canonical link) is checked before it is
stored with its chunks (search/links.py); one that cannot be a link is left out and the
summary's warnings say why, on every run until it is fixed.

Links and names (ingest/discovery.py): a symbolic link is never followed and a hard link
never stored, so that no name carries another file's text for a scope to read under it;
a file is read from the descriptor of the file discovery found (a link swapped in since
is refused); a name with a control character, a line or paragraph separator, a bidi
control, or that is not UTF-8 is refused (ingest/names.py). Each is skipped with a
reason. Library warnings raised while a file is read (pypdf's and
others') go to the log at debug level with the file's name, not to the terminal; the
summary counts them per file (`warnings`).

Hostile files: each file is read once, bounded by the limits of ingest/limits.py (bytes,
PDF pages, extracted characters, HTML depth, inflated PDF streams); one over a limit, a
FIFO or device, or a file that changes while it is read or before its chunks are
written is skipped with its reason, and the stored version of it, if any, stays.

This module is the orchestration; reading a file is ingest/reading.py, its furniture,
address, fingerprint and chunk plan ingest/planning.py.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from ingest.chunker import ChunkingConfig
from ingest.discovery import Found, Skipped, discover, inside
from ingest.document import LoadedDocument
from ingest.embedding import IngestEmbedder
from ingest.limits import DEFAULT_LIMITS, Limits, file_stamp
from ingest.planning import (
    CommitLinks,
    Planned,
    chars_to_write,
    furniture_of,
    parse_fingerprint,
    plan_document,
    without,
)
from ingest.progress import Progress
from ingest.reading import IngestWarning, Read, read_found
from search import calibration
from search.errors import IngestError
from search.store import Store


@dataclass
class IngestSummary:
    documents: int = 0  # documents written (new or changed)
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0  # chunks written in this run
    skipped: list[Skipped] = field(default_factory=list)
    seconds: float = 0.0
    warnings: list[IngestWarning] = field(default_factory=list)
    # Where the seconds went (benchmarks/ingest_throughput.py prints them; not in as_json):
    # prepare (find, read, parse, furniture), plan (chunk and tokenise, in the producer
    # thread, overlapping the rest), wait (for the producer), encode (the model), write
    # (the store), finish (deletions, commit, the gate's calibration).
    stages: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {
            "documents": self.documents,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "chunks": self.chunks,
            "skipped": [{"source": s.source, "reason": s.reason} for s in self.skipped],
            "warnings": [{"source": w.source, "reason": w.reason} for w in self.warnings],
            "seconds": round(self.seconds, 3),
        }


def _name(found: list[Found], stored: dict[str, str]) -> list[Found]:
    """A file the store already holds keeps its name: named on its own, or found again by
    ingesting a subfolder of the folder that named it. (A name an older version gave,
    relative to the working directory, is replaced by the new one.)"""
    by_location = {}
    for source, value in stored.items():
        if "@" in value:
            _h, origin = parse_fingerprint(value)
            by_location[origin / source] = (source, origin)
    named = []
    for f in found:
        known = by_location.get(f.location)
        # A file named on its own is judged for furniture with the pages of its folder.
        named.append(replace(f, source=known[0], origin=known[1], folder=f.folder or known[1]) if known else f)
    return named


def _claims(found: list[Found], stored: dict[str, tuple[str, Path]]) -> tuple[list[Found], list[Skipped]]:
    """Files whose name is free (or theirs) in the store and in this run; the others, with reasons."""
    taken: dict[str, Path] = {}
    ok: list[Found] = []
    refused: list[Skipped] = []
    locations: set[Path] = set()
    # Files found in folders first: a file also named on its own is ingested once, by its folder's name.
    for f in sorted(found, key=lambda f: f.folder is None):
        if f.location in locations:
            continue
        if f.source in taken and taken[f.source] != f.location:
            refused.append(
                Skipped(
                    f.source,
                    f"another file of this run has the same name ({taken[f.source]}); "
                    "ingest their common folder instead",
                )
            )
            continue
        if f.source in stored:
            _h, origin = stored[f.source]
            other = origin / f.source
            if other != f.location and other.exists():
                refused.append(
                    Skipped(
                        f.source,
                        f"the store already holds this name from another folder "
                        f"({origin}); ingest this folder into a store of its own "
                        "(CITEBOT_STORE or CITEBOT_INDEX)",
                    )
                )
                continue
        taken[f.source] = f.location
        locations.add(f.location)
        ok.append(f)
    return ok, refused


def prepare(
    paths: Iterable[Path],
    stored: dict[str, str] | None = None,
    within: Path | None = None,
    limits: Limits = DEFAULT_LIMITS,
    warned: list[IngestWarning] | None = None,
) -> tuple[list[Read], list[Skipped], dict[str, set[str]]]:
    """Discover, name, read and judge furniture: everything before chunking, no store writes."""
    paths = [Path(p) for p in paths]
    known = {s: parse_fingerprint(v) for s, v in (stored or {}).items()}
    found, skipped = discover(paths, within)
    found, refused = _claims(_name(found, stored or {}), known)
    skipped += refused
    reads: list[Read] = []
    for f in found:
        try:
            reads.append(read_found(f, known, limits, warned))
        except IngestError as exc:
            skipped.append(Skipped(f.source, str(exc).removeprefix(f"{f.source}: ")))
        except OSError as exc:
            skipped.append(Skipped(f.source, f"unreadable ({exc.strerror or exc})"))
    # A selection `within` a folder is judged among itself, not with the folder's other pages.
    walked = {p.resolve() for p in paths if p.is_dir()} | ({within.resolve()} if within else set())
    return reads, skipped, furniture_of(reads, walked, limits)


def load_collection(paths: Iterable[Path]) -> tuple[list[LoadedDocument], list[Skipped]]:
    """The documents as ingest would chunk them (furniture removed), without a store."""
    reads, skipped, furniture = prepare(paths)
    docs = [without(r.doc, furniture.get(r.found.source, set())) for r in reads if r.doc is not None]
    empty = [d for d in docs if not d.sections]
    skipped += [Skipped(d.source, "only page furniture, no text") for d in empty]
    return [d for d in docs if d.sections], skipped


# Windows embedded together: the windows of consecutive documents are pooled until there
# are this many, then sorted by length into the model's batches, so a batch pads short
# windows only to its own longest and few batches run part-empty. (Per-document batches
# gave 15 windows/s against a raw 28 on a 5,385-window manual:
# docs/decisions/0020-ingest-batches.md.)
POOL_WINDOWS = 512
# Documents chunked and tokenised ahead of the model by the producer thread, at most.
READ_AHEAD_DOCS = 64


def _planned(reads: list[Read], plan, stop: threading.Event) -> Iterator[Planned]:
    """The planned documents in order, planned by a producer thread that runs ahead of the
    model by at most READ_AHEAD_DOCS (tokenising while torch computes; the queue bounds
    the memory). An error in the producer is raised here; `stop` ends the producer."""
    done = object()
    q: queue.Queue = queue.Queue(maxsize=READ_AHEAD_DOCS)

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for r in reads:
                if not put(plan(r)):
                    return
            put(done)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            put(exc)

    worker = threading.Thread(target=produce, name="citebot-ingest-plan", daemon=True)
    worker.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


def ingest(
    paths: Iterable[Path],
    store: Store,
    embedder: IngestEmbedder,
    *,
    chunking: ChunkingConfig | None = None,
    progress: bool | None = None,
    within: Path | None = None,
    limits: Limits = DEFAULT_LIMITS,
    source_url: str | None = None,
    commit_links: CommitLinks | None = None,
    calibrate: bool = True,
) -> IngestSummary:
    """Ingest files and folders into the store; see the module docstring (and `discover` for
    `within`); `source_url` (CITEBOT_SOURCE_URL) resolves documents' relative addresses;
    `commit_links` gives a git source's documents without an address of their own a link to
    their file at the synced commit (ingest/sync.py); `calibrate=False` leaves the gate's
    calibration to the caller (a sync measures it once, after its last source).

    Documents are chunked and tokenised ahead (a producer thread), their windows embedded
    in pools of POOL_WINDOWS sorted by length, and each document written in its own store
    transaction once its windows are embedded: an interrupted run leaves whole documents.

    One run at a time per embedded store: a second is refused (IngestLockedError).
    """
    with store.ingest_lock():
        return _ingest(
            paths,
            store,
            embedder,
            chunking=chunking,
            progress=progress,
            within=within,
            limits=limits,
            source_url=source_url,
            commit_links=commit_links,
            calibrate=calibrate,
        )


def _ingest(
    paths: Iterable[Path],
    store: Store,
    embedder: IngestEmbedder,
    *,
    chunking: ChunkingConfig | None,
    progress: bool | None,
    within: Path | None,
    limits: Limits,
    source_url: str | None,
    commit_links: CommitLinks | None = None,
    calibrate: bool = True,
) -> IngestSummary:
    started = time.perf_counter()
    summary = IngestSummary()
    store.open_for(embedder.stamp)
    stored = store.document_hashes()
    known = {s: parse_fingerprint(v) for s, v in stored.items()}
    paths = [Path(p) for p in paths]
    reads, skipped, furniture = prepare(paths, stored, within, limits, summary.warnings)
    summary.skipped = skipped
    show = sys.stderr.isatty() if progress is None else progress
    bar = Progress(
        files=len(reads),
        chars=sum(chars_to_write(r, furniture, stored, source_url, commit_links) for r in reads),
        enabled=show,
    )
    pool: list[Planned] = []

    stages = summary.stages
    stages.update(prepare=time.perf_counter() - started, plan=0.0, wait=0.0, encode=0.0, write=0.0)

    def flush() -> None:
        jobs = [j for p in pool for j in p.jobs]
        t0 = time.perf_counter()
        windows = embedder.encode_jobs(jobs) if jobs else []
        t1 = time.perf_counter()
        at = 0
        for p in pool:
            assert p.record is not None and p.path is not None
            done = windows[at : at + len(p.jobs)]
            at += len(p.jobs)
            if file_stamp(p.path) != p.stamp:
                # Saved again while it was chunked and embedded: what was read is no longer
                # the file, so nothing is written and the stored version (if any) stays.
                summary.skipped.append(
                    Skipped(
                        p.record.source,
                        "changed while it was being ingested; the stored "
                        "version, if any, is kept: ingest again once it is saved",
                    )
                )
                bar.advance(files=1, chars=p.chars)
                continue
            store.replace_document(p.record, p.chunks, done)
            summary.documents += 1
            summary.chunks += len(p.chunks)
            bar.advance(files=1, chunks=len(p.chunks), windows=len(p.jobs), chars=p.chars)
        pool.clear()
        stages["encode"] += t1 - t0
        stages["write"] += time.perf_counter() - t1

    def plan(r: Read) -> Planned:
        t0 = time.perf_counter()
        try:
            return plan_document(r, furniture, stored, embedder, chunking, source_url, commit_links)
        finally:
            stages["plan"] += time.perf_counter() - t0

    stop = threading.Event()
    try:
        waited = time.perf_counter()
        for p in _planned(reads, plan, stop):
            stages["wait"] += time.perf_counter() - waited
            if p.warning is not None:
                summary.warnings.append(p.warning)
            if p.unchanged or p.skipped is not None:
                if p.unchanged:
                    summary.unchanged += 1
                elif p.skipped is not None:
                    summary.skipped.append(p.skipped)
                bar.advance(files=1)
                waited = time.perf_counter()
                continue
            pool.append(p)
            if sum(len(x.jobs) for x in pool) >= POOL_WINDOWS:
                flush()
            waited = time.perf_counter()
        flush()
        bar.finishing()
        finishing = time.perf_counter()
        summary.deleted = _delete_gone(store, paths, reads, summary.skipped, known)
        store.commit_ingest()
        if calibrate:
            recalibrate(store, embedder, changed=bool(summary.documents or summary.deleted))
    finally:
        stop.set()
        bar.close()
    summary.seconds = time.perf_counter() - started
    stages["finish"] = time.perf_counter() - finishing
    return summary


def recalibrate(store: Store, embedder: IngestEmbedder, *, changed: bool) -> None:
    """The refusal gate's calibration, stored with the collection (search.calibration):
    measured again whenever the collection changed, or when it has none yet."""
    if store.chunk_count() == 0:
        return
    if changed or calibration.stored(store) is None:
        calibration.calibrate(store, embedder.encode_texts)


def _delete_gone(
    store: Store, paths: list[Path], reads: list[Read], skipped: list[Skipped], known: dict[str, tuple[str, Path]]
) -> int:
    """Delete documents of the ingested folders whose files are gone, old names of files renamed,
    and what was stored under a name that is a link now."""
    folders = [p.resolve() for p in paths if p.is_dir()]
    now = {r.found.location: r.found.source for r in reads}
    kept = {s.source for s in skipped}
    links = {s.drop for s in skipped if s.drop is not None}
    gone = []
    for source, (_h, origin) in known.items():
        location = origin / source
        if location in links:
            gone.append(source)
        elif location in now and now[location] != source:
            gone.append(source)  # the same file, stored under an older name
        elif (
            source not in kept
            and source not in now.values()
            and any(inside(location, f) for f in folders)
            and not location.exists()
        ):
            gone.append(source)
    if gone:
        store.delete_documents(gone)
    return len(gone)
