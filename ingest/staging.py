"""A source's documents written into its folder of the sync cache, ready to ingest.

Each source has a folder `CACHE/NAME/` holding its documents in `CACHE/NAME/NAME/`, and,
hidden (so never ingested), its bare git repository `.repo` and state `.state.json`.
`citebot sync` ingests `CACHE/NAME/`, so every name is `NAME/<path>` and a file gone from
the source is deleted within that folder only (ingest/pipeline.py deletes by folder).

- git: the fetched commit's files under the source's `path`; a file whose staged bytes
  already are the commit's blob is left as it is, others are written, and staged files the
  commit no longer has are removed. A submodule or a symbolic link is skipped with a reason.
- folder: a mirror of the files ingest would read there (ingest/discovery.py: links and
  names refused, with their reasons), copied when their size or time changed.
- archive (.zip): extracted into a new folder which then replaces the old one
  (ingest/archives.py).

A folder or an archive holding a Confluence or Notion export is staged as ingest/exports.py
plans: its index and icons left out, Notion's ids taken out of the names.

Any failure raises before the store is touched: the source's documents stay as they were.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

from ingest import git
from ingest.discovery import Skipped, discover
from ingest.exports import plan
from ingest.limits import DEFAULT_LIMITS, Limits, read_file
from ingest.sources import Source
from search.errors import CitebotError, IngestError

# Members of one archive, at most: a wiki export of a large space has a few thousand pages;
# a hundred thousand entries is an archive built to exhaust the disk's inodes, not an export
# (docs/decisions/0035-sources-and-sync.md).
MAX_ARCHIVE_MEMBERS = 100_000
# Bytes of one archive, extracted, at most (each member is also held to the ingest limit
# of one file, CITEBOT_INGEST_MAX_BYTES): ten times the largest single file ingest reads
# (docs/decisions/0035-sources-and-sync.md).
MAX_ARCHIVE_BYTES = 500_000_000
_DRIVE = re.compile(r"^[A-Za-z]:")


class SyncError(CitebotError):
    """A source that could not be brought up to date; its documents are left as they were."""


def _too_big(name: str, size: int, limits: Limits) -> Skipped:
    return Skipped(
        name, f"{size:,} bytes, over the limit of {limits.max_bytes:,} for one file (CITEBOT_INGEST_MAX_BYTES)"
    )


def _unsafe(path: str) -> bool:
    parts = path.split("/")
    return path.startswith("/") or "\\" in path or bool(_DRIVE.match(path)) or ".." in parts or "\0" in path


def _hidden(path: str) -> bool:
    return any(p.startswith(".") for p in path.split("/"))


def _write(target: Path, data: bytes, mtime_ns: int | None = None) -> None:
    """Write a staged file whole (a temporary file renamed over it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    tmp = target.with_name(f".{target.name}.part")
    tmp.write_bytes(data)
    if mtime_ns is not None:
        os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.replace(tmp, target)


def _prune(docs: Path, keep: set[str]) -> None:
    """Remove staged files (and folders left empty) that are not in `keep`."""
    for dirpath, dirnames, filenames in os.walk(docs, topdown=False):
        here = Path(dirpath)
        for name in filenames:
            rel = (here / name).relative_to(docs).as_posix()
            if rel not in keep:
                (here / name).unlink()
        for name in dirnames:
            d = here / name
            if d.is_symlink():
                d.unlink()
            elif not any(d.iterdir()):
                d.rmdir()


def _clear_conflicts(docs: Path, paths: set[str]) -> None:
    """A staged file where a new file needs a folder (or the other way round) goes first."""
    for rel in paths:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            p = docs.joinpath(*parts[:i])
            if p.is_symlink() or p.is_file():
                p.unlink()


def stage_git(
    source: Source, root: Path, token: str | None, limits: Limits = DEFAULT_LIMITS
) -> tuple[str, list[Skipped]]:
    """Fetch the source's branch and stage its files; (the commit, what was skipped)."""
    repo, docs = root / ".repo", root / source.name
    commit = git.fetch(repo, source.location, source.branch, token=token, user=source.token_user)
    if not git.has_folder(repo, commit, source.path):
        raise SyncError(
            f"the commit {commit[:12]} has no folder {source.path!r} (the source's path); fix path in CITEBOT_SOURCES"
        )
    skipped: list[Skipped] = []
    files: dict[str, str] = {}
    for e in git.entries(repo, commit, source.path):
        name = f"{source.name}/{e.path}"
        if _hidden(e.path):
            continue
        if e.mode == "160000":
            skipped.append(
                Skipped(
                    name,
                    f"submodule (another repository, at {e.sha[:12]}; not fetched): "
                    "add that repository as a source of its own to ingest it",
                )
            )
        elif e.mode == "120000":
            skipped.append(Skipped(name, "symbolic link (not followed: a file is stored under its own name only)"))
        elif _unsafe(e.path):
            skipped.append(Skipped(name, "a path that would leave the source's folder"))
        elif e.size is not None and e.size > limits.max_bytes:
            skipped.append(_too_big(name, e.size, limits))
        else:
            files[e.path] = e.sha
    if len(files) > MAX_ARCHIVE_MEMBERS:
        raise SyncError(
            f"the commit has {len(files):,} files, over {MAX_ARCHIVE_MEMBERS:,}; set path to the folder of documents"
        )
    docs.mkdir(parents=True, exist_ok=True)
    _prune(docs, set(files))
    _clear_conflicts(docs, set(files))
    stale: dict[str, list[str]] = {}
    for rel, sha in files.items():
        target = docs / rel
        try:
            if target.is_file() and not target.is_symlink() and git.blob_id(target.read_bytes()) == sha:
                continue
        except OSError:
            pass
        stale.setdefault(sha, []).append(rel)
    for sha, data in git.blobs(repo, list(stale)):
        for rel in stale[sha]:
            _write(docs / rel, data)
    return commit, skipped


def stage_folder(source: Source, root: Path, limits: Limits = DEFAULT_LIMITS) -> list[Skipped]:
    """Mirror the files ingest would read in the source's folder; what was skipped there."""
    folder = Path(source.location)
    if not folder.is_dir():
        raise SyncError(
            f"the folder {source.location} {'is not a folder' if folder.exists() else 'does not exist'}"
            " (unmounted?); its documents are kept until it is back"
        )
    found, refused = discover([folder])
    export = plan([f.source for f in found])
    skipped = [Skipped(f"{source.name}/{s.source}", s.reason) for s in refused + export.skipped]
    docs = root / source.name
    docs.mkdir(parents=True, exist_ok=True)
    keep = set(export.names.values())
    _prune(docs, keep)
    _clear_conflicts(docs, keep)
    for f in found:
        if f.source not in export.names:
            continue
        target = docs / export.names[f.source]
        try:
            st = os.stat(f.path, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                continue  # a FIFO or device: ingest says why when it meets one
            if st.st_size > limits.max_bytes:
                skipped.append(_too_big(f"{source.name}/{f.source}", st.st_size, limits))
                continue
            mine = target.stat() if target.is_file() else None
            if mine and mine.st_size == st.st_size and mine.st_mtime_ns == st.st_mtime_ns:
                continue
            data, _stamp = read_file(f.path, f.source, limits, f.at)
            _write(target, data, st.st_mtime_ns)
        except IngestError as exc:
            skipped.append(Skipped(f"{source.name}/{f.source}", str(exc).removeprefix(f"{f.source}: ")))
        except OSError as exc:
            skipped.append(Skipped(f"{source.name}/{f.source}", f"unreadable ({exc.strerror or exc})"))
    return skipped
