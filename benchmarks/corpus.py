"""The large benchmark corpus: Debian's Rust documentation, fetched at run time.

`apt-get download rust-doc` brings the Rust books (mdBook HTML) and the standard
library's API reference (rustdoc HTML); the folders in BOOKS are unpacked under
~/.cache/citebot/bench/rust-doc and never enter the repository. Pages are taken book by
book in BOOKS order, in path order within a book (redirect stubs left out), until an
ingest of them stores at least TARGET_CHUNKS chunks (furniture judged among the selected
pages, as ingest(..., within=CACHE) judges it), so the corpus is the same on every
machine with the same package version and ingest code: prose first (a tutorial, a
language reference, examples), then API pages, as a team's mixed documentation would be.
The embedded store built from it is cached beside it (`--build`: measured, about 6
minutes on 2 shared CPU cores) and checked against the listing's count; the
Elasticsearch index is filled from that store's vectors, never re-embedded.

(This corpus was once another Debian documentation package, now reserved for independent
measurement and never used here; the figures taken on it were withdrawn.)
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.common import REPO
from ingest.chunker import chunk_document, doc_id_for
from ingest.embedder import Embedder
from ingest.loaders import load
from ingest.pipeline import ingest, prepare
from ingest.planning import without
from search.embedded import DB_NAME, EmbeddedStore
from search.errors import IngestError
from search.types import Chunk, DocumentRecord, Window

PACKAGE = "rust-doc"
# One folder per package, so a cache built from another corpus is never taken for this one.
CACHE = Path(os.environ.get("CITEBOT_BENCH_CACHE", Path.home() / ".cache" / "citebot" / "bench")) / PACKAGE
HTML_ROOT = Path("usr/share/doc/rust-doc/html")
# The large corpus is one of 10,000+ chunks.
TARGET_CHUNKS = 10_000
# Taken in this order. With rust-doc 1.63.0+dfsg1-2 and an ingest that leaves page
# furniture out and skips redirect stubs the eight books give 3,238 chunks (book 866,
# reference 608, rust-by-example 346, nomicon 186, edition-guide 84, embedded-book 212,
# rustc 783, rustdoc 153) and 163 std pages fill the rest (6,822 chunks).
# Left out: unstable-book (600 one-paragraph feature pages under a 600-entry sidebar),
# core/ and alloc/ (std re-exports them) and the rendered sources (src/).
BOOKS = ("book", "reference", "rust-by-example", "nomicon", "edition-guide", "embedded-book",
         "rustc", "rustdoc", "std")
# Folders that are old editions kept as redirect stubs, and pages that repeat a whole book
# (print.html) or say nothing (404.html).
SKIP_PARTS = {"first-edition", "second-edition", "2018-edition"}
SKIP_NAMES = {"print.html", "404.html"}
# Moved pages kept as stubs that refresh to the new address (the nomicon's old chapters,
# std's re-export paths such as collections/hash/map/): 154 of the first 967 candidates, one
# "Redirecting to ..." chunk each. The refresh sits in the first few hundred bytes.
REDIRECT_MARK = b'http-equiv="refresh"'
REDIRECT_HEAD_BYTES = 2048
QUESTIONS = [
    "How do I read a file line by line?",
    "What does the question mark operator do with a Result?",
    "How can I run a subprocess and capture its output?",
    "difference between a String and a str",
    "When is a value dropped?",
    "what is the borrow checker complaining about when I move out of a borrowed value",
    "How do I share data between threads safely?",
    "How do I sort a vector of structs by a field?",
    "HashMap entry or_insert",
    "What happens when a thread panics while holding a mutex?",
    "How do I create a new project with cargo?",
    "pattern matching with match guards",
    "What is a trait object and when do I need dyn?",
    "integer overflow in release builds",
    "How do lifetimes work in function signatures?",
    "iterator adapters map filter collect",
    "unsafe code and raw pointers",
    "What are the rules for the orphan rule and coherence?",
    "How do I parse command line arguments?",
    "repr(C) struct layout for FFI",
]


def corpus_root() -> Path:
    """The unpacked HTML of BOOKS, fetched with apt-get on first use."""
    root = CACHE / "corpus"
    html = root / HTML_ROOT
    if html.is_dir():
        return html
    debs = CACHE / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob(f"{PACKAGE}_*.deb")):
        r = subprocess.run(["apt-get", "download", PACKAGE], cwd=debs, check=False)
        if r.returncode != 0:
            raise SystemExit(f"apt-get download {PACKAGE} failed (exit {r.returncode}); "
                             "run `apt-get update` and try again")
    (deb,) = sorted(debs.glob(f"{PACKAGE}_*.deb"))[-1:]
    tmp = root.with_suffix(".tmp")
    subprocess.run(["rm", "-rf", str(tmp)], check=True)
    tmp.mkdir(parents=True)
    # Only the folders used (the whole package unpacks to 580 MB, mostly core/ and src/).
    members = [f"./{HTML_ROOT.as_posix()}/{book}/*" for book in BOOKS]
    subprocess.run(f"dpkg-deb --fsys-tarfile {shlex.quote(str(deb))} | tar -x -C {shlex.quote(str(tmp))} "
                   "--wildcards " + " ".join(shlex.quote(m) for m in members), shell=True, check=True)
    tmp.rename(root)
    return html


def is_redirect(page: Path) -> bool:
    """A stub whose only text is "Redirecting to ..." (a meta refresh in its head)."""
    with page.open("rb") as f:
        return REDIRECT_MARK in f.read(REDIRECT_HEAD_BYTES).lower()


def html_pages(html: Path) -> list[Path]:
    """The candidate pages: book by book in BOOKS order, in path order within a book."""
    return [
        p for book in BOOKS for p in sorted((html / book).rglob("*.html"))
        if not (SKIP_PARTS & set(p.relative_to(html).parts)) and p.name not in SKIP_NAMES
        and not is_redirect(p)
    ]


def ingest_chunks(pages: list[Path], embedder: Embedder) -> int:
    """Chunks an ingest of these pages stores: read, furniture judged among the selection
    itself (as ingest(..., within=CACHE) judges it) and left out, then chunked."""
    reads, _, furniture = prepare(pages, within=CACHE)
    total = 0
    for r in reads:
        if r.doc is None:
            continue
        doc = without(r.doc, furniture.get(r.found.source, set()))
        if doc.sections:
            total += len(chunk_document(doc, doc_id_for(r.found.source), embedder.count_tokens))
    return total


def page_chunks(page: Path, embedder: Embedder) -> int:
    """Chunks of one page read alone (before the repetition rule): the selection's guess."""
    source = page.relative_to(CACHE).as_posix()
    try:
        return len(chunk_document(load(page, source), doc_id_for(source), embedder.count_tokens))
    except IngestError:  # a page the loader refuses is left out of the corpus
        return 0


def select_pages(embedder: Embedder) -> tuple[list[Path], int]:
    """Pages in path order until an ingest of them stores TARGET_CHUNKS chunks; cached as a
    list of paths with that count (the embedded store is checked against it)."""
    html = corpus_root()
    listing = CACHE / "pages.json"
    if listing.exists():
        data = json.loads(listing.read_text())
        return [html / p for p in data["pages"]], int(data["chunks"])
    candidates = iter(html_pages(html))
    pages: list[Path] = []
    # The repetition rule takes a page's furniture only among many pages, so the count of
    # a selection is known once it is read together: grow it by the shortfall, guessed
    # from the pages read alone, and count again.
    total = 0
    while total < TARGET_CHUNKS:
        short = TARGET_CHUNKS - total
        for page in candidates:
            guess = page_chunks(page, embedder)
            if guess:
                pages.append(page)
                short -= guess
                if short <= 0:
                    break
        else:
            raise SystemExit(f"the pages of BOOKS in {PACKAGE} make fewer than {TARGET_CHUNKS} chunks")
        total = ingest_chunks(pages, embedder)
    listing.write_text(json.dumps(
        {"pages": [p.relative_to(html).as_posix() for p in pages], "chunks": total}))
    return pages, total


def embedded_store(embedder: Embedder) -> EmbeddedStore:
    """The corpus ingested into an embedded store under the cache (built once)."""
    target = CACHE / "embedded"
    done = CACHE / "embedded.json"
    pages, chunks = select_pages(embedder)
    if done.exists():
        store = EmbeddedStore(target)
    else:
        store = EmbeddedStore(target)
        # Sources are named relative to the cache folder.
        summary = ingest(pages, store, embedder, progress=sys.stderr.isatty(), within=CACHE)
        done.write_text(json.dumps(summary.as_json() | {"built_at": time.time()}))
    if store.chunk_count() != chunks:
        # The listing was counted, or the store built, by other ingest code than this.
        raise SystemExit(
            f"{target} holds {store.chunk_count()} chunks but {CACHE / 'pages.json'} counted "
            f"{chunks}: delete both and {done.name}, then run `python -m benchmarks.corpus --build`")
    return store


@dataclass
class StoredDocument:
    record: DocumentRecord
    chunks: list[Chunk]
    windows: list[Window]


def stored_documents(store: EmbeddedStore) -> list[StoredDocument]:
    """Every document of an embedded store with its chunks and window vectors (to fill
    another backend with the same vectors, without embedding again)."""
    db = sqlite3.connect(store.directory / DB_NAME)
    dims = store.stamp().dims  # type: ignore[union-attr]
    chunks_by_doc: dict[str, list[Chunk]] = {}
    for c in store.iter_chunks():
        chunks_by_doc.setdefault(c.doc_id, []).append(c)
    windows_by_doc: dict[str, list[Window]] = {}
    for chunk_id, doc_id, idx, start, end, blob in db.execute(
        "SELECT c.chunk_id, c.doc_id, w.idx, w.start, w.end, w.vector FROM windows w"
        " JOIN chunks c ON c.id = w.chunk_rowid ORDER BY c.source, c.ordinal, w.idx"
    ):
        vector = np.frombuffer(blob, dtype=np.float32).reshape(dims).copy()
        windows_by_doc.setdefault(doc_id, []).append(Window(chunk_id, idx, start, end, vector))
    docs = [
        StoredDocument(DocumentRecord(*row), chunks_by_doc.get(row[0], []),
                       windows_by_doc.get(row[0], []))
        for row in db.execute(
            "SELECT doc_id, source, content_hash, title, format FROM documents ORDER BY source")
    ]
    db.close()
    return docs


def examples_store(embedder: Embedder) -> EmbeddedStore:
    """examples/handbook ingested into an embedded store under the cache (built once)."""
    target = CACHE / "examples-embedded"
    done = CACHE / "examples-embedded.json"
    if done.exists():
        return EmbeddedStore(target)
    store = EmbeddedStore(target)
    cwd = os.getcwd()
    os.chdir(REPO)  # sources named relative to the repository, as the tests name them
    try:
        summary = ingest([REPO / "examples" / "handbook"], store, embedder, progress=False)
    finally:
        os.chdir(cwd)
    done.write_text(json.dumps(summary.as_json()))
    return store


def examples_questions() -> list[str]:
    path = REPO / "examples" / "questions.jsonl"
    return [json.loads(line)["question"] for line in path.open(encoding="utf-8")]


def elastic_url() -> str:
    """The cluster the benchmarks use: CITEBOT_BENCH_ES_URL, else the test cluster."""
    url = os.environ.get("CITEBOT_BENCH_ES_URL") or os.environ.get("CITEBOT_TEST_ES_URL")
    if not url:
        raise SystemExit(
            "set CITEBOT_BENCH_ES_URL (or run `eval \"$(scripts/services start)\"`, which sets "
            "CITEBOT_TEST_ES_URL) to benchmark the Elasticsearch store"
        )
    return url


def copy_into(source: EmbeddedStore, target) -> float:
    """Write every document of an embedded store into another store; seconds taken."""
    started = time.perf_counter()
    target.open_for(source.stamp())
    for d in stored_documents(source):
        target.replace_document(d.record, d.chunks, d.windows)
    target.commit_ingest()
    return time.perf_counter() - started


def elastic_copy(source: EmbeddedStore, alias: str):
    """An Elasticsearch store under `alias` holding the same chunks and vectors as `source`
    (reused when it already does: filling it again takes minutes for the large corpus)."""
    from search.elastic import ElasticStore, connect
    from search.elastic.mapping import INDEX_FORMAT
    from search.errors import StoreError

    store = ElasticStore(connect(elastic_url(), timeout_s=120), alias=alias)
    try:
        stamp = store.stamp()
    except StoreError:  # an index of an older format (search/elastic/mapping.py INDEX_FORMAT): fill again
        stamp = None
    index = store._current_index()
    layout = store._citebot_meta(index).get("format") if index else None  # an older one may still be read
    if (stamp is None or layout != INDEX_FORMAT or store.chunk_count() != source.chunk_count()
            or stamp != source.stamp()):
        seconds = copy_into(source, store)
        print(f"filled {alias}: {source.chunk_count()} chunks in {seconds:.1f} s", file=sys.stderr)
    return store


if __name__ == "__main__":
    started = time.perf_counter()
    emb = Embedder()
    pages, chunks = select_pages(emb)
    print(f"{len(pages)} pages, {chunks} chunks (selection {time.perf_counter() - started:.0f} s)")
    if "--build" in sys.argv:
        s = embedded_store(emb)
        print(f"embedded store: {s.chunk_count()} chunks, {time.perf_counter() - started:.0f} s")
