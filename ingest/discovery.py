"""Which files an ingest reads, under which names, and the ones it refuses, with reasons.

A scope reads a passage by its source name, so a name must never carry another file's
text. Links therefore never give a name text:

- a symbolic link is never followed: one leading out of the folder, a broken one and a
  loop are skipped as such, and one to a file inside the folder is skipped because that
  file is ingested under its own name (`company/notes.md -> ../people/salaries.md` stores
  the salaries under `people/salaries.md` only); a link to a folder is not walked;
- a hard link (one file, several names) is skipped under every name: no name of it is its
  own more than another, and whichever were chosen, a scope could read the text under the
  folder the link was made in. A name that is a link now loses what the store held under it.

A file or folder whose name cannot be shown as one honest line (ingest/names.py) is
skipped too, and so is a folder that cannot be read; the rest of the run goes on.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ingest.limits import FoundAt
from ingest.names import name_refusal, shown


@dataclass
class Skipped:
    source: str
    reason: str
    # The location of a name that is a link now: what the store held under it is deleted
    # (it may be another file's text, stored by a version that followed links).
    drop: Path | None = None


@dataclass(frozen=True)
class Found:
    """A file to ingest: where it is, its name in the store, and what that name is relative to."""

    path: Path
    source: str
    origin: Path  # the resolved folder `source` is relative to
    # The resolved folder whose pages judge its repetition (ingest/furniture.py): the one it
    # was found in, or the one that named it; None for a new file named on its own.
    folder: Path | None
    # Found in a walked folder: where, and which file it was (the read opens that one or none).
    at: FoundAt | None = None

    @property
    def location(self) -> Path:
        return self.origin / self.source


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def hidden(name: str) -> bool:
    return name.startswith(".")


def _link(path: Path, rel: str, folder: Path) -> Skipped:
    """Why a symbolic link is skipped."""
    drop = folder / rel
    try:
        target = Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Skipped(rel, "symbolic link loop (not followed)", drop)
        if exc.errno == errno.ENOENT:
            return Skipped(rel, "broken symbolic link", drop)
        return Skipped(rel, f"symbolic link that cannot be resolved ({exc.strerror or exc}; not followed)", drop)
    if not inside(target, folder):
        return Skipped(rel, "symbolic link leaving the ingested folder (not followed)", drop)
    to = shown(target.relative_to(folder).as_posix())
    if target.is_dir():
        return Skipped(rel, f"symbolic link to the folder {to} (not followed)", drop)
    return Skipped(rel, f"symbolic link to {to} (not followed: a file is stored under its own name only)", drop)


def _walk(given: Path, folder: Path) -> tuple[list[tuple[Path, str, os.stat_result]], list[Skipped]]:
    """The files of a folder (path, name relative to it, lstat) and what was refused."""
    files: list[tuple[Path, str, os.stat_result]] = []
    skipped: list[Skipped] = []

    def unreadable(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else given
        rel = where.relative_to(given).as_posix() if inside(where, given) and where != given else str(given)
        skipped.append(Skipped(shown(rel), f"folder unreadable ({exc.strerror or exc}); its files are left out"))

    for dirpath, dirnames, filenames in os.walk(given, onerror=unreadable):
        here = Path(dirpath)
        keep = []
        for d in sorted(dirnames):
            rel = (here / d).relative_to(given).as_posix()
            if hidden(d):
                continue
            if (refusal := name_refusal(d)) is not None:
                skipped.append(Skipped(shown(rel), f"folder left out: {refusal}"))
                continue
            if (here / d).is_symlink():
                skipped.append(_link(here / d, rel, folder))
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(given).as_posix()
            if hidden(name):
                continue
            if (refusal := name_refusal(name)) is not None:
                skipped.append(Skipped(shown(rel), refusal))
                continue
            try:
                st = path.lstat()
            except OSError as exc:
                skipped.append(Skipped(rel, f"unreadable ({exc.strerror or exc})"))
                continue
            if stat.S_ISLNK(st.st_mode):
                skipped.append(_link(path, rel, folder))
                continue
            files.append((path, rel, st))
    return files, skipped


def _hard_links(files: list[tuple[Path, str, os.stat_result]], folder: Path) -> list[Skipped]:
    """The names of files with more than one name (hard links), each with its reason."""
    names: dict[tuple[int, int], list[str]] = defaultdict(list)
    nlinks: dict[tuple[int, int], int] = {}
    for _path, rel, st in files:
        if st.st_nlink > 1:
            names[(st.st_dev, st.st_ino)].append(rel)
            nlinks[(st.st_dev, st.st_ino)] = st.st_nlink
    skipped = []
    for key, rels in names.items():
        if nlinks[key] > len(rels):
            # A name outside the folder (or hidden) means the file also belongs elsewhere
            # (the /etc/passwd case), so it is not ours to read.
            reason = "hard link to a file outside the ingested folder (not followed)"
        else:
            others = ", ".join(shown(r) for r in sorted(rels))
            reason = (
                f"hard link (one file, {len(rels)} names here: {others}): stored under none, as a scope "
                "would read it under each; keep one name, or copy it, to ingest it"
            )
        skipped += [Skipped(rel, reason, folder / rel) for rel in sorted(rels)]
    return skipped


def discover(paths: Iterable[Path], within: Path | None = None) -> tuple[list[Found], list[Skipped]]:
    """The files to ingest, hidden files and folders left out, and the links and names refused.

    `within`: files named one by one are a selection of this folder's files, named relative
    to it (a benchmark's chosen pages); nothing of the folder is deleted for being left out.
    """
    found: list[Found] = []
    skipped: list[Skipped] = []
    base = within.resolve() if within is not None else None
    for given in paths:
        if not given.is_dir():
            origin = given.absolute().parent.resolve()
            if base is not None and inside(origin, base):
                f = Found(given, (origin / given.name).relative_to(base).as_posix(), base, base)
            else:
                f = Found(given, given.name, origin, None)
            if (refusal := name_refusal(f.source)) is not None:
                skipped.append(Skipped(shown(f.source), refusal))
            else:
                found.append(f)
            continue
        folder = given.resolve()
        files, refused = _walk(given, folder)
        skipped += refused
        linked = _hard_links(files, folder)
        skipped += linked
        gone = {s.source for s in linked}
        for path, rel, st in files:
            if rel not in gone:
                at = FoundAt(folder, tuple(rel.split("/")), st.st_dev, st.st_ino)
                found.append(Found(path, rel, folder, folder, at))
    return found, skipped
