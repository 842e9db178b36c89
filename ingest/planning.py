"""Planning a read file for the store: the page furniture of a folder (the repetition
rule, ingest/furniture.py) left out, the document's address checked (search/links.py),
the fingerprint a stored document is compared with, and the chunks and window jobs of a
changed document (no model call, no store write).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote

from ingest.chunker import ChunkingConfig, chunk_document, doc_id_for
from ingest.discovery import Skipped, discover
from ingest.document import LoadedDocument
from ingest.embedding import IngestEmbedder
from ingest.furniture import repeated_blocks
from ingest.limits import DEFAULT_LIMITS, Limits
from ingest.loaders import FORMATS, load
from ingest.reading import REPETITION_FORMATS, IngestWarning, Read, library_warnings
from search import links
from search.errors import IngestError
from search.types import DocumentRecord


def fingerprint(content_hash: str, origin: Path) -> str:
    """What the store keeps as a document's content hash: the hash and the origin folder."""
    return f"{content_hash}@{origin.as_posix()}"


def parse_fingerprint(stored: str) -> tuple[str, Path]:
    """(content hash, origin) of a stored value; one without an origin was named from the cwd."""
    content_hash, at, origin = stored.partition("@")
    return content_hash, Path(origin) if at else Path.cwd().resolve()


def without(doc: LoadedDocument, blocks: set[str]) -> LoadedDocument:
    """The document with these paragraphs left out (sections left empty are dropped)."""
    sections = [replace(s, paragraphs=[p for p in s.paragraphs if p.text not in blocks]) for s in doc.sections]
    return replace(doc, sections=[s for s in sections if s.paragraphs])


# Part of a stored fingerprint for a document with an address or heading anchors, so that
# the first ingest that stores them writes such documents again (a store written before
# holds none), and a relative address is stored anew when CITEBOT_SOURCE_URL changes.
LINKS_VERSION = "links-1"


def addressed(doc: LoadedDocument, template: str | None) -> tuple[LoadedDocument, str | None]:
    """The document with its own address checked (search/links.py): absolute, or left out
    with the reason why."""
    try:
        return replace(doc, url=links.document_url(doc.url, doc.source, template)), None
    except links.BadURL as exc:
        return replace(doc, url=None), f"{exc}; ingested without it (not shown as a link)"


@dataclass(frozen=True)
class CommitLinks:
    """Where a git source's files are shown at the synced commit (ingest/sync.py): a template
    with {commit} and {path}; `prefix` (the source's name and "/") is taken off a stored name
    and `under` (the repository's folder and "/") put before it."""

    template: str
    commit: str
    prefix: str = ""
    under: str = ""

    def url(self, source: str, commit: str | None = None) -> str:
        path = self.under + source.removeprefix(self.prefix)
        return self.template.replace("{commit}", commit or self.commit).replace("{path}", quote(path, safe="/"))


def with_links(content_hash: str, doc: LoadedDocument) -> str:
    """The content hash, extended for a document that carries an address or anchors."""
    if not doc.url and not any(s.anchor for s in doc.sections):
        return content_hash
    return hashlib.sha256("\x00".join((content_hash, LINKS_VERSION, doc.url or "")).encode()).hexdigest()


def paragraphs(doc: LoadedDocument) -> list[str]:
    return [p.text for s in doc.sections for p in s.paragraphs]


def furniture_of(reads: list[Read], walked: set[Path], limits: Limits = DEFAULT_LIMITS) -> dict[str, set[str]]:
    """Per source, the paragraphs framing most pages of the same ingested folder."""
    groups: dict[Path | None, dict[str, list[str]]] = defaultdict(dict)
    members: dict[Path | None, set[str]] = defaultdict(set)
    for r in reads:
        if r.doc is not None and r.doc.format in REPETITION_FORMATS:
            groups[r.found.folder][r.found.source] = paragraphs(r.doc)
            members[r.found.folder].add(r.found.source)
    for folder, pages in groups.items():
        if folder is not None and folder not in walked and folder.is_dir():
            # Files named on their own: their folder's other pages are read (not written).
            for f in discover([folder])[0]:
                if f.source not in pages and FORMATS.get(f.path.suffix.lower()) in REPETITION_FORMATS:
                    try:
                        with library_warnings(f.source):
                            pages[f.source] = paragraphs(load(f.path, f.source, limits))
                    except (IngestError, OSError):
                        continue
    out: dict[str, set[str]] = {}
    for folder, pages in groups.items():
        out.update({s: v for s, v in repeated_blocks(pages).items() if s in members[folder]})
    return out


@dataclass
class Planned:
    """One document ready to embed: its record, chunks and window jobs; or what to count."""

    record: DocumentRecord | None = None
    chunks: list = field(default_factory=list)
    jobs: list = field(default_factory=list)
    unchanged: bool = False
    skipped: Skipped | None = None
    chars: int = 0  # of the document's text (what the progress line's ETA counts)
    warning: IngestWarning | None = None  # its address was left out, and why
    path: Path | None = None  # the file, and its (size, mtime, inode) when it was read
    stamp: tuple[int, int, int] | None = None


def _content_hash(r: Read, removed: set[str]) -> str:
    """The file's hash, and the repeated paragraphs left out of it: they are part of what
    was ingested, so when they change (pages added to the folder) the page is chunked again."""
    if not removed:
        return r.content_hash
    return hashlib.sha256((r.content_hash + "\x00" + "\x00".join(sorted(removed))).encode()).hexdigest()


def _linked(
    r: Read, removed: set[str], source_url: str | None, commit_links: CommitLinks | None = None
) -> tuple[str, LoadedDocument | None, str | None]:
    """The hash a stored fingerprint is compared with (the file's, the repeated paragraphs
    left out, the document's address and anchors), the document with its address checked,
    and why its address was left out (None when it is fine)."""
    content_hash = _content_hash(r, removed)
    if r.doc is None:
        return content_hash, None, None
    if commit_links is not None and not (r.doc.url or "").strip():
        linked, problem = addressed(replace(r.doc, url=commit_links.url(r.doc.source)), source_url)
        # The commit is left out of what is compared: a document unchanged since an earlier
        # commit is not written again, and keeps its link to that commit (the same text).
        stable = replace(linked, url=commit_links.url(r.doc.source, "{commit}") if linked.url else None)
        return with_links(content_hash, stable), linked, problem
    linked, problem = addressed(r.doc, source_url)
    return with_links(content_hash, linked), linked, problem


def chars_to_write(
    r: Read,
    furniture: dict[str, set[str]],
    stored: dict[str, str],
    source_url: str | None,
    commit_links: CommitLinks | None = None,
) -> int:
    """Characters of the file's text when it will be embedded (changed or new), else 0."""
    removed = furniture.get(r.found.source, set())
    content_hash, linked, _problem = _linked(r, removed, source_url, commit_links)
    if linked is None or stored.get(r.found.source) == fingerprint(content_hash, r.found.origin):
        return 0
    return sum(len(p) for p in paragraphs(linked) if p not in removed)


def plan_document(
    r: Read,
    furniture: dict[str, set[str]],
    stored: dict[str, str],
    embedder: IngestEmbedder,
    chunking: ChunkingConfig | None,
    source_url: str | None,
    commit_links: CommitLinks | None = None,
) -> Planned:
    """Chunk one read file and tokenise its windows (no model call, no store write)."""
    f = r.found
    removed = furniture.get(f.source, set())
    content_hash, linked, problem = _linked(r, removed, source_url, commit_links)
    warning = IngestWarning(f.source, problem) if problem else None
    if stored.get(f.source) == fingerprint(content_hash, f.origin):
        return Planned(unchanged=True, warning=warning)
    assert linked is not None  # only a file whose fingerprint is stored goes unread
    doc = without(linked, removed)
    if not doc.sections:
        return Planned(skipped=Skipped(f.source, "only page furniture, no text"), warning=warning)
    doc_id = doc_id_for(f.source)
    chunks = chunk_document(doc, doc_id, embedder.count_tokens, chunking)
    record = DocumentRecord(doc_id, f.source, fingerprint(content_hash, f.origin), doc.title, doc.format)
    return Planned(
        record,
        chunks,
        embedder.plan(chunks),
        chars=sum(len(p) for p in paragraphs(doc)),
        warning=warning,
        path=f.path,
        stamp=r.stamp,
    )
