"""Reading one discovered file: opened from the descriptor discovery found, read once
within the limits (ingest/limits.py), hashed, and parsed by its format (ingest/loaders.py)
when it may need writing. Library warnings raised while it is read go to the log and are
counted per file (IngestWarning).
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog

from ingest.discovery import Found
from ingest.document import LoadedDocument
from ingest.limits import DEFAULT_LIMITS, Limits, read_file
from ingest.loaders import FORMATS, parse
from search.errors import IngestError

log = structlog.get_logger("citebot.ingest")

# Loggers of the libraries the loaders call; their records are the file's, not the user's.
LIBRARY_LOGGERS = ("pypdf", "PyPDF2", "fontTools", "PIL")
# Formats judged by the repetition rule (ingest/furniture.py): pages that site generators
# and wiki exports write. Every such file is loaded on every run, changed or not, which
# is cheap for these; a PDF is loaded only when it changed (layout extraction is slow).
REPETITION_FORMATS = ("html", "markdown", "text")


@dataclass
class IngestWarning:
    """A file ingested with something left out or read with complaints, and why (a document's
    unusable address; library warnings while it was read, counted)."""

    source: str
    reason: str


@contextmanager
def library_warnings(source: str, warned: list[IngestWarning] | None = None) -> Iterator[None]:
    """Warnings that libraries raise or log while one file is read go to the log (debug);
    with `warned`, one line per file counting them is added to it."""
    records: list[logging.LogRecord] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = _Collect(logging.DEBUG)
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    saved = [(lg.propagate, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
        lg.setLevel(logging.WARNING)
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:  # a file that fails to load has its warnings logged too
        for lg, (propagate, level) in zip(loggers, saved):
            lg.removeHandler(handler)
            lg.propagate, lg.level = propagate, level
        for record in records:
            log.debug("library_warning", source=source, library=record.name, message=record.getMessage())
        for w in caught:
            log.debug("library_warning", source=source, library=w.category.__name__, message=str(w.message))
        messages = [r.getMessage() for r in records] + [str(w.message) for w in caught]
        if warned is not None and messages:
            first = " ".join(messages[0].split())
            first = first if len(first) <= 120 else first[:119] + "…"
            warned.append(
                IngestWarning(
                    source,
                    f"{len(messages)} library warning(s) while reading, the first: "
                    f"{first!r} (all in the log at debug level)",
                )
            )


@dataclass
class Read:
    found: Found
    content_hash: str
    doc: LoadedDocument | None  # loaded when it may need writing, or is judged for furniture
    stamp: tuple[int, int, int] | None = None  # (size, mtime, inode) when it was read


def read_found(
    f: Found,
    stored: dict[str, tuple[str, Path]],
    limits: Limits = DEFAULT_LIMITS,
    warned: list[IngestWarning] | None = None,
) -> Read:
    """Read a file once, hash it, and load it when it changed; text formats always, for the
    repetition rule."""
    if not f.path.exists():
        raise IngestError(f"{f.source}: no such file")
    fmt = FORMATS.get(f.path.suffix.lower())
    if fmt is None:
        raise IngestError(f"{f.source}: unsupported format {f.path.suffix or '(no extension)'!r}")
    data, stamp = read_file(f.path, f.source, limits, f.at)
    content_hash = hashlib.sha256(data).hexdigest()
    old = stored.get(f.source)
    if fmt not in REPETITION_FORMATS and old == (content_hash, f.origin):
        return Read(f, content_hash, None, stamp)
    with library_warnings(f.source, warned):
        doc = parse(data, fmt, f.source, limits)
    return Read(f, content_hash, doc, stamp)
