"""A .zip source extracted safely into a new folder, a wiki export in it recognised
(ingest/exports.py) and staged under the names its citations show.

Refused whole (SyncError, the source's documents kept): a member with an absolute path, a
drive letter or "..", more than MAX_ARCHIVE_MEMBERS members (the parts' members counted
together), more than MAX_ARCHIVE_BYTES extracted, an archive zipfile cannot read.
Skipped with a reason, the rest extracted: a symbolic link, a member over the one-file
limit (CITEBOT_INGEST_MAX_BYTES, counted as it is read: a header may lie), a member that
inflates more than MAX_ARCHIVE_RATIO times its compressed size, an archive inside the
archive (only an archive of archives, an export in parts as Notion writes a large one,
is opened, one level deep), and what the export plan leaves out.
"""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from ingest.discovery import Skipped
from ingest.exports import plan
from ingest.limits import DEFAULT_LIMITS, Limits
from ingest.staging import (
    MAX_ARCHIVE_BYTES,
    MAX_ARCHIVE_MEMBERS,
    SyncError,
    _clear_conflicts,
    _hidden,
    _too_big,
    _unsafe,
    _write,
)

# Inflated size over compressed size of one member, at most: 1,417 real HTML, Markdown and
# text pages of the benchmark collections compress 2.7x at the median and 13.7x at most
# (zlib level 9); deflate's ceiling, a bomb's ratio, is about 1,030x. Held only to members
# over RATIO_FLOOR bytes: a small file costs nothing whatever its ratio
# (docs/decisions/0039-wiki-exports.md).
MAX_ARCHIVE_RATIO = 100
RATIO_FLOOR = 1_000_000
# Archives inside an archive opened: one level, the parts of an export split in several
# zips (Notion's Part-1.zip, Part-2.zip); deeper is an archive built to multiply itself
# (docs/decisions/0039-wiki-exports.md).
MAX_ARCHIVE_NESTING = 1


@dataclass
class _Member:
    name: str  # its path in the export (a part's members are named as if not in a part)
    info: zipfile.ZipInfo
    zf: zipfile.ZipFile


def _is_zip(name: str) -> bool:
    return name.lower().endswith(".zip")


def _files(z: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    # macOS's zip tool adds __MACOSX/ (resource forks), never documents.
    return [
        i for i in z.infolist() if not i.is_dir() and not _hidden(i.filename) and not i.filename.startswith("__MACOSX/")
    ]


def _check(infos: list[zipfile.ZipInfo], where: str) -> None:
    for i in infos:
        if _unsafe(i.filename.rstrip("/")):
            raise SyncError(
                f"the archive member {where}{i.filename[:200]!r} would be written outside its "
                "folder (an absolute path or '..'): the archive is refused whole"
            )


def _members(z: zipfile.ZipFile, limits: Limits, opened: list[zipfile.ZipFile]) -> tuple[list[_Member], list[Skipped]]:
    """The archive's files, a split export's parts opened (one level); what was not opened."""
    if len(z.infolist()) > MAX_ARCHIVE_MEMBERS:
        raise SyncError(f"the archive has {len(z.infolist()):,} members, over {MAX_ARCHIVE_MEMBERS:,}")
    _check(z.infolist(), "")
    files = _files(z)
    if not files or not all(_is_zip(i.filename) for i in files):
        skipped = [
            Skipped(
                i.filename,
                "an archive inside the archive (not opened: only an archive of archives, an export in parts, is)",
            )
            for i in files
            if _is_zip(i.filename)
        ]
        return [_Member(i.filename, i, z) for i in files if not _is_zip(i.filename)], skipped
    members: list[_Member] = []
    skipped = []
    total = 0
    for part in files:
        if part.file_size > limits.max_bytes:
            raise SyncError(
                f"the export's part {part.filename[:200]!r} holds {part.file_size:,} bytes, over the "
                f"limit of {limits.max_bytes:,} for one file (CITEBOT_INGEST_MAX_BYTES)"
            )
        with z.open(part) as f:
            data = f.read(limits.max_bytes + 1)
        inner = zipfile.ZipFile(io.BytesIO(data))
        opened.append(inner)
        total += len(inner.infolist())
        if total > MAX_ARCHIVE_MEMBERS:
            raise SyncError(f"the archive's parts have over {MAX_ARCHIVE_MEMBERS:,} members together")
        _check(inner.infolist(), f"{part.filename}: ")
        for i in _files(inner):
            if _is_zip(i.filename):
                skipped.append(
                    Skipped(
                        i.filename,
                        f"an archive inside the part {part.filename} (not opened: "
                        f"archives are opened {MAX_ARCHIVE_NESTING} level deep)",
                    )
                )
            else:
                members.append(_Member(i.filename, i, inner))
    return members, skipped


def _inflates_too_much(size: int, compressed: int) -> bool:
    return size > RATIO_FLOOR and size > MAX_ARCHIVE_RATIO * max(compressed, 1)


def _read(m: _Member, limits: Limits) -> bytes | Skipped:
    i = m.info
    if stat.S_ISLNK(i.external_attr >> 16):
        return Skipped(m.name, "symbolic link in the archive (not followed)")
    if i.file_size > limits.max_bytes:
        return _too_big(m.name, i.file_size, limits)
    if _inflates_too_much(i.file_size, i.compress_size):
        return Skipped(
            m.name,
            f"inflates from {i.compress_size:,} to {i.file_size:,} bytes, over "
            f"{MAX_ARCHIVE_RATIO} times its size in the archive (a decompression bomb?)",
        )
    with m.zf.open(i) as member:
        data = member.read(limits.max_bytes + 1)  # a header may lie about the size
    if len(data) > limits.max_bytes:
        return _too_big(m.name, len(data), limits)
    return data


def extract_zip(archive: Path, into: Path, limits: Limits = DEFAULT_LIMITS) -> list[Skipped]:
    """Extract a .zip into a new folder `into`, safely, a wiki export in it staged under its
    clean names; what was left out, with reasons. SyncError for an archive refused whole."""
    opened: list[zipfile.ZipFile] = []
    try:
        with zipfile.ZipFile(archive) as z:
            members, skipped = _members(z, limits, opened)
            by_name = {m.name: m for m in members}
            export = plan(list(by_name))
            skipped += export.skipped
            total = 0
            into.mkdir(parents=True)
            for name, staged in export.names.items():
                data = _read(by_name[name], limits)
                if isinstance(data, Skipped):
                    skipped.append(data)
                    continue
                total += len(data)
                if total > MAX_ARCHIVE_BYTES:
                    raise SyncError(
                        f"the archive holds over {MAX_ARCHIVE_BYTES:,} bytes extracted, over the "
                        "limit for one archive: split the export"
                    )
                target = into / staged
                if target.exists() and target.is_dir():
                    skipped.append(Skipped(name, "both a file and a folder in the archive"))
                    continue
                _clear_conflicts(into, {staged})
                _write(target, data)
            return skipped
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, ValueError, zlib.error) as exc:
        raise SyncError(f"the archive cannot be read ({exc}); export it again") from None
    finally:
        for inner in opened:
            inner.close()
