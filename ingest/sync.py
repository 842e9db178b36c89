"""`citebot sync`: each named source (ingest/sources.py) brought up to date in the store.

A source is staged into its folder of the sync cache (ingest/staging.py), then that folder
is ingested as any folder is (ingest/pipeline.py): a document whose content hash is stored
is not read again by the model, a changed one is replaced whole, one that disappeared is
deleted, all within the source's own name prefix. A source that fails (network, a bad
branch, a broken archive) is reported with the reason, its documents left as they were,
and the next source still syncs.

An archive is re-read only when its sha256 changed since the last sync that finished; a
git source or a folder is staged again on every sync (cheap: only changed files are
written, and ingest skips every unchanged one by its hash). A sync killed part-way leaves
whole documents (each is written in one transaction) and the next sync completes it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ingest.archives import extract_zip
from ingest.chunker import ChunkingConfig
from ingest.discovery import Skipped
from ingest.embedding import IngestEmbedder
from ingest.limits import DEFAULT_LIMITS, Limits
from ingest.pipeline import IngestSummary, ingest, recalibrate
from ingest.planning import CommitLinks
from ingest.reading import IngestWarning
from ingest.sources import Source
from ingest.staging import SyncError, stage_folder, stage_git
from search.errors import CitebotError
from search.store import Store

STATE = ".state.json"


@dataclass
class SyncReport:
    """One source's sync: counts in documents; `error` says why it failed (None when it did not)."""

    name: str
    kind: str
    commit: str | None = None
    added: int = 0
    changed: int = 0
    deleted: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[IngestWarning] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "commit": self.commit,
            "added": self.added,
            "changed": self.changed,
            "deleted": self.deleted,
            "skipped": len(self.skipped),
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _state(root: Path) -> dict:
    try:
        value = json.loads((root / STATE).read_text("utf-8"))
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(root: Path, state: dict) -> None:
    tmp = root / (STATE + ".part")
    tmp.write_text(json.dumps(state), "utf-8")
    tmp.replace(root / STATE)


def _names(store: Store, prefix: str) -> set[str]:
    return {s for s in store.document_hashes() if s.startswith(prefix)}


def _stage_archive(source: Source, root: Path, limits: Limits, stored: bool) -> tuple[str, list[Skipped] | None]:
    """Extract the archive when its sha256 changed (or the last sync of it did not finish,
    or the store holds none of its documents: another store, or one emptied); (its sha256,
    what was skipped), or (sha256, None) when it is as last synced."""
    archive = Path(source.location)
    if not archive.is_file():
        raise SyncError(f"the archive {source.location} does not exist or is not a file")
    checksum = _sha256(archive)
    if _state(root).get("sha256") == checksum and (root / source.name).is_dir() and stored:
        return checksum, None
    new, old = root / ".new", root / ".old"
    for stale in (new, old):
        shutil.rmtree(stale, ignore_errors=True)
    skipped = extract_zip(archive, new, limits)
    docs = root / source.name
    (root / STATE).unlink(missing_ok=True)  # marked finished again only once ingested
    if docs.exists():
        docs.rename(old)
    new.rename(docs)
    shutil.rmtree(old, ignore_errors=True)
    return checksum, [Skipped(f"{source.name}/{s.source}", s.reason) for s in skipped]


def sync_source(
    source: Source,
    store: Store,
    embedder: IngestEmbedder,
    cache: Path,
    *,
    token: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    progress: bool | None = None,
    chunking: ChunkingConfig | None = None,
    source_url: str | None = None,
    calibrate: bool = True,
) -> SyncReport:
    """Stage one source and ingest it; failures are the report's `error`, never raised.
    `calibrate=False`: the gate's calibration is left to the caller (sync does it once)."""
    started = time.perf_counter()
    report = SyncReport(source.name, source.kind)
    root = (cache / source.name).resolve()
    prefix = source.name + "/"
    try:
        root.mkdir(parents=True, exist_ok=True)
        links = None
        if source.kind == "git":
            report.commit, report.skipped = stage_git(source, root, token, limits)
            if source.link:
                links = CommitLinks(source.link, report.commit, prefix, source.path + "/" if source.path else "")
        elif source.kind == "folder":
            report.skipped = stage_folder(source, root, limits)
        else:
            store.open_for(embedder.stamp)
            checksum, skipped = _stage_archive(source, root, limits, bool(_names(store, prefix)))
            if skipped is None:
                report.seconds = time.perf_counter() - started
                return report
            report.skipped = skipped
        store.open_for(embedder.stamp)
        before = _names(store, prefix)
        summary: IngestSummary = ingest(
            [root],
            store,
            embedder,
            chunking=chunking,
            progress=progress,
            limits=limits,
            source_url=source_url,
            commit_links=links,
            calibrate=calibrate,
        )
        after = _names(store, prefix)
        report.added = len(after - before)
        report.deleted = len(before - after)
        report.changed = max(summary.documents - report.added, 0)
        report.skipped += summary.skipped
        report.warnings = summary.warnings
        if source.kind == "archive":
            _save_state(root, {"sha256": checksum})
    except (CitebotError, OSError) as exc:
        report.error = str(exc) if not isinstance(exc, OSError) else f"{exc.strerror or exc} ({exc.filename})"
    report.seconds = time.perf_counter() - started
    return report


def sync(
    sources: Iterable[Source],
    store: Store,
    embedder: IngestEmbedder,
    cache: Path,
    *,
    tokens: dict[str, str] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    progress: bool | None = None,
    source_url: str | None = None,
    on_report: Callable[[SyncReport], None] | None = None,
) -> list[SyncReport]:
    """Every source synced in turn; one failing never stops the others. The gate's
    calibration (measured over the whole collection) is measured once, after the last
    source, when any changed: a write drops the stored one, so a sync killed before it
    leaves none, and the next run measures it."""
    reports = []
    for source in sources:
        report = sync_source(
            source,
            store,
            embedder,
            cache,
            token=(tokens or {}).get(source.name),
            limits=limits,
            progress=progress,
            source_url=source_url,
            calibrate=False,
        )
        reports.append(report)
        if on_report is not None:
            on_report(report)
    changed = any(r.added or r.changed or r.deleted for r in reports)
    try:
        with store.ingest_lock():
            recalibrate(store, embedder, changed=changed)
    except CitebotError as exc:
        for r in reports:
            r.error = r.error or f"the gate's calibration failed after the sync: {exc}"
    return reports
