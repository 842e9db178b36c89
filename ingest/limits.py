"""Per-file limits of the ingest, and the one bounded, stable read of a file.

A file over a limit is skipped whole with a reason that names the limit and the setting
that raises it; the rest of the run goes on. The limits bound what one file can cost
(memory, time), never what a collection may hold. Each default sits next to what set it,
measured on the six benchmark collections (benchmarks/collections/) and the largest real
PDF on this machine (debian-reference.en.pdf: 1.28 MB, 261 pages, 521,845 extracted
characters, loaded in 9.2 s at a peak RSS of 64 MB); `benchmarks/hostile.py` measures
what each hostile file costs with them.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from search.errors import IngestError

# The largest real file of the collections is 1.85 MB (sqlite's requirements.html); a PDF
# with scanned images runs to tens of MB. 50 MB is 27x the largest page and is read into
# memory at about twice its size: a 200 MB file is refused by its size, unread.
MAX_FILE_BYTES = 50_000_000
# debian-reference: 261 pages at 35 ms a page of layout extraction; 2,000 pages is about
# 70 s of extraction, 7.7x the longest real manual.
MAX_PDF_PAGES = 2_000
# Extracted text: debian-reference gives 521,845 characters, the largest HTML page under
# 1.6 M. 5 M characters is about 1.2 M tokens, some 5,000 embedding windows: minutes of
# embedding on a CPU, but bounded.
MAX_TEXT_CHARS = 5_000_000
# Open HTML elements at once: the deepest real page nests 63 (sqlite's changelog, its
# unclosed <li>s), Sphinx and DocBook pages 17-23. Browsers cap the tree near 512.
MAX_HTML_DEPTH = 1_000
# One PDF stream, inflated (FlateDecode and the other filters): pypdf's own default, 75 MB,
# which a 300 dpi A4 colour image (25 MB raw) stays well under. A decompression bomb
# stops there instead of filling memory.
MAX_INFLATED_BYTES = 75_000_000
# All the streams text extraction decodes in one PDF (its pages' content, forms and
# ToUnicode maps; ingest/loaders/pdf_budget.py): 2,000 pages (MAX_PDF_PAGES) of dense text run to
# about 40 KB of content each, 80 MB. Layout extraction parses some 4-8 MB of content a
# second, so this bounds a file to ~25 s and its cached streams to 100 MB; 20 pages of
# 70 MB each (every stream under the limit above) took 173 s and 1.87 GB without it.
MAX_INFLATED_FILE_BYTES = 100_000_000
# Office files (.docx, .pptx, .odt; ingest/loaders/package.py) are zip packages of XML parts.
# Members of one package: LibreOffice writes 11 (docx) to 45 (a two-slide pptx); a deck of
# 500 slides is some 2,000 (each slide and its notes, with their .rels) plus its images.
# The count is read from the zip's end record before zipfile parses the directory (a 50 MB
# zip of empty members holds some 470,000; docs/decisions/0028-office-files.md).
MAX_ZIP_MEMBERS = 10_000
# XML elements of one office file: LibreOffice's .docx of sqlite's documentation pages
# holds 0.19-0.25 elements per character of text, so MAX_TEXT_CHARS is about 1.25 M
# elements. They are counted by their start tags before a part is parsed (bytes.count as
# it inflates), so a flood of empty paragraphs, which adds no text, is refused at the cost
# of inflating it. Parsed, 1.2 M elements (300,000 Word paragraphs, 13 M characters) took
# 4.6 s of CPU (docs/decisions/0028-office-files.md).
MAX_XML_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class Limits:
    """What one file may cost; the settings CITEBOT_INGEST_MAX_* override each."""

    max_bytes: int = MAX_FILE_BYTES
    max_pages: int = MAX_PDF_PAGES
    max_chars: int = MAX_TEXT_CHARS
    max_depth: int = MAX_HTML_DEPTH
    max_inflated_bytes: int = MAX_INFLATED_BYTES
    max_inflated_file_bytes: int = MAX_INFLATED_FILE_BYTES
    max_zip_members: int = MAX_ZIP_MEMBERS
    max_xml_elements: int = MAX_XML_ELEMENTS


DEFAULT_LIMITS = Limits()


def over(what: str, found: str, limit: int, setting: str) -> IngestError:
    return IngestError(f"{what} {found}, over the limit of {limit:,} (raise it with {setting})")


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino


def file_stamp(path: os.PathLike[str] | str) -> tuple[int, int, int] | None:
    """(size, mtime in ns, inode) of the file now; None when it is gone."""
    try:
        return _stamp(os.stat(path))
    except OSError:
        return None


@dataclass(frozen=True)
class FoundAt:
    """Where discovery found a file inside an ingested folder, and which file it was then."""

    folder: Path  # the resolved folder
    parts: tuple[str, ...]  # the path inside it, one name a level
    device: int  # st_dev and st_ino of the file discovery saw (lstat: not a link)
    inode: int


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _open(path: os.PathLike[str] | str, at: FoundAt | None, flags: int) -> int:
    """A descriptor of the file; with `at`, opened from its folder down, one level at a time,
    following no symbolic link on the way (a folder or the file swapped for a link since it
    was found fails with ELOOP or ENOTDIR instead of leading out of the folder)."""
    if at is None:
        return os.open(path, flags)
    if os.open not in os.supports_dir_fd or not at.parts:
        return os.open(path, flags | _NOFOLLOW)
    fd = os.open(at.folder, os.O_RDONLY | _DIRECTORY)
    try:
        for part in at.parts[:-1]:
            below = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = below
        return os.open(at.parts[-1], flags | _NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def read_file(
    path: os.PathLike[str] | str, source: str, limits: Limits = DEFAULT_LIMITS, at: FoundAt | None = None
) -> tuple[bytes, tuple[int, int, int]]:
    """The bytes of a regular file, read once, and its stamp; IngestError says why not.

    Refused unread: anything but a regular file (a FIFO would block the read forever, a
    device never ends) and a file over `max_bytes`; with `at`, a file that is no longer the
    one discovery found there (a symbolic link now, on the way or at the end, or another
    file): the check and the read are of one descriptor. Refused after reading: a file
    whose size or modification time moved while it was read (it is being written; the
    stored version, if any, stays).
    """
    # Non-blocking only to open: a FIFO opened for reading would wait for a writer.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = _open(path, at, flags)
    except OSError as exc:
        if at is not None and exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise IngestError(
                f"{source}: replaced by a symbolic link since it was found (not followed); "
                "the stored version, if any, is kept"
            ) from exc
        raise IngestError(f"{source}: unreadable ({exc.strerror or exc})") from exc
    try:
        before = os.fstat(fd)
        if at is not None and (before.st_dev, before.st_ino) != (at.device, at.inode):
            raise IngestError(
                f"{source}: replaced by another file since it was found (not read); "
                "the stored version, if any, is kept: ingest again"
            )
        if not stat.S_ISREG(before.st_mode):
            raise IngestError(f"{source}: not a regular file (a FIFO, socket or device); left out")
        if before.st_size > limits.max_bytes:
            raise over(f"{source}: file of", f"{before.st_size:,} bytes", limits.max_bytes, "CITEBOT_INGEST_MAX_BYTES")
        os.set_blocking(fd, True)
        parts: list[bytes] = []
        left = limits.max_bytes + 1
        while left > 0:
            piece = os.read(fd, min(left, 1 << 20))
            if not piece:
                break
            parts.append(piece)
            left -= len(piece)
        data = b"".join(parts)
        after = os.fstat(fd)
    except OSError as exc:
        raise IngestError(f"{source}: unreadable ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if len(data) > limits.max_bytes:
        raise over(
            f"{source}: file grew while read, past",
            f"{limits.max_bytes:,} bytes",
            limits.max_bytes,
            "CITEBOT_INGEST_MAX_BYTES",
        )
    if _stamp(before) != _stamp(after) or len(data) != after.st_size:
        raise IngestError(
            f"{source}: changed while it was read (it is being written); "
            "the stored version, if any, is kept: ingest again once it is saved"
        )
    return data, _stamp(after)
