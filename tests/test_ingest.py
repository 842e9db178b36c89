"""Ingest: verbatim text, idempotence, interruption, bad files, stamps."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from ingest import pipeline
from ingest.loaders import load
from ingest.pipeline import ingest
from search.embedded import DB_NAME, EmbeddedStore
from search.errors import DimensionError, ModelMismatchError
from search.types import DocumentRecord, ModelStamp, Window

LONG_PARA = (
    "The night shift checks every Battery Swap Station before the first wave of orders. "
    "A station that reports a cell above forty-five degrees is taken out of rotation. "
)


def write_docs(root: Path, n: int = 4) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = root / f"doc{i}.md"
        body = "\n\n".join(f"Paragraph {j} of document {i}. " + LONG_PARA * 3 for j in range(12))
        p.write_text(f"# Document {i}\n\n## Section A\n\n{body}\n\n## Section B\n\nShort tail {i}.\n")
        paths.append(p)
    return paths


def test_stored_text_is_verbatim_source_text(tmp_path, embedder):
    docs = tmp_path / "docs"
    write_docs(docs, 2)
    store = EmbeddedStore(tmp_path / "s")
    ingest([docs], store, embedder, progress=False)
    for c in store.iter_chunks():
        source = (docs / c.source).read_text()
        for para in c.text.split("\n\n"):
            assert para in source


def test_reingest_is_idempotent_and_tracks_changes(tmp_path, embedder):
    docs = tmp_path / "docs"
    paths = write_docs(docs, 3)
    store = EmbeddedStore(tmp_path / "s")
    first = ingest([docs], store, embedder, progress=False)
    assert (first.documents, first.unchanged) == (3, 0)
    ids = [c.chunk_id for c in store.iter_chunks()]

    again = ingest([docs], store, embedder, progress=False)
    assert (again.documents, again.unchanged, again.chunks) == (0, 3, 0)
    assert [c.chunk_id for c in store.iter_chunks()] == ids  # stable ids

    paths[0].write_text("# Changed\n\nOnly one paragraph now.\n")
    paths[1].unlink()
    third = ingest([docs], store, embedder, progress=False)
    assert (third.documents, third.unchanged, third.deleted) == (1, 1, 1)
    sources = {c.source for c in store.iter_chunks()}
    assert sources == {"doc0.md", "doc2.md"}
    assert [c.text for c in store.iter_chunks() if c.source == "doc0.md"] == ["Only one paragraph now."]


class _Interrupting:
    """Wraps the real embedder and raises Ctrl-C at the n-th call of the model."""

    def __init__(self, inner, at: int) -> None:
        self.inner, self.at, self.calls = inner, at, 0
        self.stamp, self.count_tokens, self.plan = inner.stamp, inner.count_tokens, inner.plan

    def encode_jobs(self, jobs):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.inner.encode_jobs(jobs)


def test_interrupted_ingest_keeps_previous_state_and_next_run_completes(tmp_path, embedder, monkeypatch):
    docs = tmp_path / "docs"
    write_docs(docs, 4)
    store = EmbeddedStore(tmp_path / "s")
    monkeypatch.setattr(pipeline, "POOL_WINDOWS", 1)  # one document per model call
    with pytest.raises(KeyboardInterrupt):
        ingest([docs], store, _Interrupting(embedder, at=3), progress=False)
    # Two whole documents, nothing of the third: each document is one transaction.
    by_source = {}
    for c in store.iter_chunks():
        by_source.setdefault(c.source, []).append(c)
    assert sorted(by_source) == ["doc0.md", "doc1.md"]
    assert len(store.document_hashes()) == 2

    summary = ingest([docs], store, embedder, progress=False)
    assert (summary.documents, summary.unchanged) == (2, 2)
    assert len(store.document_hashes()) == 4


def _stored_vectors(store: EmbeddedStore, source: str) -> dict[tuple[str, int], np.ndarray]:
    db = sqlite3.connect(store.directory / DB_NAME)
    try:
        rows = db.execute("SELECT c.chunk_id, w.idx, w.vector FROM windows w JOIN chunks c"
                          " ON c.id = w.chunk_rowid WHERE c.source = ?", (source,)).fetchall()
    finally:
        db.close()
    return {(cid, idx): np.frombuffer(blob, np.float32) for cid, idx, blob in rows}


def test_documents_pooled_for_the_model_are_written_whole_and_alike(tmp_path, embedder):
    """Windows of several documents go through the model together; each document still
    gets exactly its own windows, the same vectors as embedding it alone."""
    docs = tmp_path / "docs"
    write_docs(docs, 4)
    store = EmbeddedStore(tmp_path / "s")
    ingest([docs], store, embedder, progress=False)
    for source in ("doc0.md", "doc3.md"):
        chunks = [c for c in store.iter_chunks() if c.source == source]
        alone = embedder.embed_chunks(chunks)
        v = _stored_vectors(store, source)
        assert len(v) == len(alone)
        for w in alone:
            assert np.allclose(v[(w.chunk_id, w.index)], w.vector, atol=1e-5)


def test_bad_files_are_skipped_with_reasons_and_never_abort(tmp_path, embedder):
    docs = tmp_path / "docs"
    write_docs(docs, 1)
    (docs / "empty.md").write_text("")
    (docs / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    (docs / "latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (docs / "sheet.xlsx").write_bytes(b"PK\x03\x04")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 garbage")
    store = EmbeddedStore(tmp_path / "s")
    summary = ingest([docs], store, embedder, progress=False)
    reasons = {s.source.rsplit("/", 1)[-1]: s.reason for s in summary.skipped}
    assert reasons["empty.md"] == "empty file"
    assert "binary" in reasons["blob.txt"]
    assert "not UTF-8" in reasons["latin1.md"]
    assert "unsupported format" in reasons["sheet.xlsx"]
    assert "PDF" in reasons["broken.pdf"]
    assert summary.documents == 1


def test_store_refuses_another_model_and_a_wrong_width(tmp_path):
    store = EmbeddedStore(tmp_path / "s")
    stamp = ModelStamp("model-a", 4, "abc")
    store.open_for(stamp)
    with pytest.raises(ModelMismatchError) as err:
        store.open_for(ModelStamp("model-b", 4, "def"))
    assert "model-a" in str(err.value) and "model-b" in str(err.value)
    doc = DocumentRecord("d", "x.md", "h", "X", "markdown")
    with pytest.raises(DimensionError):
        store.replace_document(doc, [], [Window("c", 0, 0, 1, np.zeros(3, np.float32))])
    store.close()
    # The stamp survives a reopen: a store built by another model fails loudly on open.
    with pytest.raises(ModelMismatchError):
        EmbeddedStore(tmp_path / "s").open_for(ModelStamp("model-b", 4, "def"))


def test_windows_cover_every_token_of_a_long_chunk(embedder):
    text = " ".join(f"token{i}" for i in range(900))
    spans = embedder.windows(text)
    assert len(spans) > 1
    assert spans[0].start == 0 and spans[-1].end == len(text)
    for a, b in zip(spans, spans[1:]):
        assert b.start < a.end  # consecutive windows overlap: nothing falls between
    for s in spans:
        assert embedder.count_tokens(text[s.start : s.end]) <= embedder.max_tokens


def _para(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_each_paragraph_of_a_chunk_is_a_window_of_its_own(embedder):
    from ingest.embedder import PARAGRAPH_WINDOW_MIN_TOKENS

    paras = [_para(t, 40) for t in ("alpha", "beta", "gamma")]
    assert all(embedder.count_tokens(p) >= PARAGRAPH_WINDOW_MIN_TOKENS for p in paras)
    text = "\n\n".join(paras)
    spans = embedder.paragraph_windows(text)
    assert [text[s.start : s.end] for s in spans] == paras


def test_short_paragraphs_are_merged_and_a_short_tail_joins_the_group_before(embedder):
    short = ["Install it.", "Then run it.", "Check the log.", "Done."]
    long = _para("delta", 40)
    text = "\n\n".join([*short, long, "See also: foo."])
    spans = [text[s.start : s.end] for s in embedder.paragraph_windows(text)]
    # The four short ones hold fewer than 64 tokens, so they run on into the long one;
    # the one-line tail is under half of 64 and joins that group rather than stand alone.
    assert spans == [text]
    text2 = "\n\n".join([long, *short, long])
    spans2 = [text2[s.start : s.end] for s in embedder.paragraph_windows(text2)]
    assert spans2 == [long, "\n\n".join([*short, long])]


def test_a_paragraph_longer_than_a_window_is_cut_into_overlapping_windows(embedder):
    intro, huge = _para("intro", 40), _para("token", 900)
    text = intro + "\n\n" + huge
    spans = embedder.paragraph_windows(text, prefix_tokens=10)
    assert text[spans[0].start : spans[0].end] == intro
    rest = spans[1:]
    assert len(rest) > 3 and rest[0].start == len(intro) + 2 and rest[-1].end == len(text)
    for a, b in zip(rest, rest[1:]):
        assert b.start < a.end  # overlapping: nothing of the paragraph falls between
    for s in spans:
        assert embedder.count_tokens(text[s.start : s.end]) <= embedder.max_tokens - 10
    # Every token of the text lies inside some window.
    for start, end in embedder.tokenizer.encode(text, add_special_tokens=False).offsets:
        assert any(s.start <= start and end <= s.end for s in spans)


def test_a_chunk_without_blank_lines_keeps_its_token_windows(embedder):
    text = _para("word", 700)
    assert embedder.paragraph_windows(text) == embedder.windows(text)
    assert embedder.paragraph_windows("") == embedder.windows("")


def test_planned_windows_are_the_heading_path_and_one_paragraph_group(embedder):
    from search.types import Chunk

    paras = [_para("epsilon", 40), _para("zeta", 40)]
    text = "\n\n".join(paras)
    chunk = Chunk(chunk_id="c1", doc_id="d", source="a.md", heading_path=("Guide", "Setup"), page=None,
                  ordinal=0, text=text, tokens=embedder.count_tokens(text))
    jobs = embedder.plan([chunk])
    assert [chunk.text[j.span.start : j.span.end] for j in jobs] == paras
    # The model's tokenizer is uncased: the heading path comes back lower-cased.
    assert [j.text for j in jobs] == ["guide > setup: " + p for p in paras]


def test_loaders_keep_headings_out_of_paragraphs(tmp_path):
    md = tmp_path / "a.md"
    md.write_text("# Title\n\nIntro para\nsecond line.\n\n## Sub\n\n```\n# not a heading\n```\n\nSetext\n------\n\nEnd.\n")
    doc = load(md, "a.md")
    assert [s.heading_path for s in doc.sections] == [("Title",), ("Title", "Sub"), ("Title", "Setext")]
    assert doc.sections[0].paragraphs[0].text == "Intro para\nsecond line."
    assert doc.sections[1].paragraphs[0].text == "```\n# not a heading\n```"
    html = tmp_path / "b.html"
    html.write_text("<html><head><title>T</title></head><body><h1>Top</h1><p>Fish &amp; chips&rsquo;\n  today</p>"
                    "<h2>Next</h2><ul><li>one</li><li>two</li></ul><table><tr><td>a</td><td>b</td></tr></table></body></html>")
    doc = load(html, "b.html")
    assert doc.title == "T"
    assert doc.sections[0].paragraphs[0].text == "Fish & chips’ today"
    assert [p.text for p in doc.sections[1].paragraphs] == ["one", "two", "a | b"]


def test_sources_are_relative_to_the_ingested_folder_and_a_file_keeps_its_folder_name(tmp_path, embedder):
    docs = tmp_path / "docs"
    write_docs(docs / "ops", 2)
    store = EmbeddedStore(tmp_path / "s")
    ingest([docs], store, embedder, progress=False)
    assert set(store.document_hashes()) == {"ops/doc0.md", "ops/doc1.md"}
    # Named on its own, a file already ingested with its folder keeps the folder's name.
    (docs / "ops" / "doc0.md").write_text("# Changed\n\nOnly one paragraph now.\n")
    summary = ingest([docs / "ops" / "doc0.md"], store, embedder, progress=False)
    assert summary.documents == 1 and set(store.document_hashes()) == {"ops/doc0.md", "ops/doc1.md"}
    # Ingesting a subfolder of the ingested folder finds the same documents, names kept.
    again = ingest([docs / "ops"], store, embedder, progress=False)
    assert (again.documents, again.unchanged, again.deleted) == (0, 2, 0)
    assert set(store.document_hashes()) == {"ops/doc0.md", "ops/doc1.md"}
    # A file new to the store is named by its file name.
    loose = tmp_path / "elsewhere" / "notes.md"
    loose.parent.mkdir()
    loose.write_text("# Notes\n\nThe kettle moved to the annex.\n")
    ingest([loose], store, embedder, progress=False)
    assert "notes.md" in store.document_hashes()
    assert not any(s.startswith("/") for s in store.document_hashes())


def test_a_selection_of_a_folders_files_is_named_within_it(tmp_path, embedder):
    docs = tmp_path / "docs"
    write_docs(docs / "a", 1)
    write_docs(docs / "b", 2)  # b/doc0.md and a/doc0.md share a file name
    store = EmbeddedStore(tmp_path / "s")
    summary = ingest([docs / "a" / "doc0.md", docs / "b" / "doc0.md"], store, embedder, progress=False,
                     within=docs)
    assert summary.skipped == [] and set(store.document_hashes()) == {"a/doc0.md", "b/doc0.md"}
    # Without it the two are one name: the second is refused, with what to do.
    other = EmbeddedStore(tmp_path / "s2")
    summary = ingest([docs / "a" / "doc0.md", docs / "b" / "doc0.md"], other, embedder, progress=False)
    assert [s.source for s in summary.skipped] == ["doc0.md"] and "same name" in summary.skipped[0].reason


def test_two_folders_with_the_same_names_never_overwrite_each_other(tmp_path, embedder):
    first, second = tmp_path / "first", tmp_path / "second"
    write_docs(first, 1)
    second.mkdir()
    (second / "doc0.md").write_text("# Other\n\nA different document with the same name.\n")
    (second / "own.md").write_text("# Own\n\nOnly the second folder has this one.\n")
    store = EmbeddedStore(tmp_path / "s")
    ingest([first], store, embedder, progress=False)
    before = [c.text for c in store.iter_chunks()]
    summary = ingest([second], store, embedder, progress=False)
    (refused,) = summary.skipped
    assert refused.source == "doc0.md" and "another folder" in refused.reason and "store of its own" in refused.reason
    assert [c.text for c in store.iter_chunks() if c.source == "doc0.md"] == before
    assert summary.documents == 1 and summary.deleted == 0
    # Re-ingesting the first folder still finds its documents and deletes what is gone.
    (first / "doc0.md").unlink()
    again = ingest([first], store, embedder, progress=False)
    assert again.deleted == 1 and set(store.document_hashes()) == {"own.md"}
    # Now the name is free: the second folder's file takes it.
    last = ingest([second], store, embedder, progress=False)
    assert last.skipped == [] and last.documents == 1
    assert [c.text for c in store.iter_chunks() if c.source == "doc0.md"] == ["A different document with the same name."]


def test_a_document_named_by_an_older_version_is_renamed(tmp_path, embedder, monkeypatch):
    docs = tmp_path / "docs"
    write_docs(docs, 1)
    store = EmbeddedStore(tmp_path / "s")
    store.open_for(embedder.stamp)
    # What an earlier citebot stored: the name relative to the working directory, no origin.
    store.replace_document(DocumentRecord("old", "docs/doc0.md", "0" * 64, "Document 0", "markdown"), [], [])
    store.commit_ingest()
    monkeypatch.chdir(tmp_path)
    summary = ingest([docs], store, embedder, progress=False)
    assert summary.deleted == 1 and set(store.document_hashes()) == {"doc0.md"}


def test_links_are_skipped_with_a_reason_and_never_give_a_name_text(tmp_path, test_embedder):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "passwd.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
    docs = tmp_path / "docs"
    write_docs(docs, 2)
    (docs / "out.txt").symlink_to(secret / "passwd.txt")
    (docs / "outdir").symlink_to(secret, target_is_directory=True)
    os.link(secret / "passwd.txt", docs / "hard.txt")
    (docs / "inside.md").symlink_to(docs / "doc0.md")
    os.link(docs / "doc1.md", docs / "twin.md")  # one file, two names in the folder
    store = EmbeddedStore(tmp_path / "s")
    summary = ingest([docs], store, test_embedder, progress=False)
    reasons = {s.source: s.reason for s in summary.skipped}
    twin = ("hard link (one file, 2 names here: doc1.md, twin.md): stored under none, as a scope "
            "would read it under each; keep one name, or copy it, to ingest it")
    assert reasons == {
        "out.txt": "symbolic link leaving the ingested folder (not followed)",
        "outdir": "symbolic link leaving the ingested folder (not followed)",
        "hard.txt": "hard link to a file outside the ingested folder (not followed)",
        "inside.md": "symbolic link to doc0.md (not followed: a file is stored under its own name only)",
        "doc1.md": twin, "twin.md": twin,
    }
    assert set(store.document_hashes()) == {"doc0.md"}  # under its own name, once
    assert not any("root:x" in c.text for c in store.iter_chunks())


def test_library_warnings_go_to_the_log_not_the_terminal(tmp_path, embedder, capfd):
    import io
    import logging

    from pypdf import PdfWriter
    from structlog.testing import capture_logs

    from bot.logs import configure  # the command line's logging, as `citebot ingest` has it

    writer = PdfWriter()
    writer.add_blank_page(200, 200)
    buf = io.BytesIO()
    writer.write(buf)
    data = buf.getvalue()
    head, _, tail = data.rpartition(b"startxref")
    docs = tmp_path / "docs"
    write_docs(docs, 1)
    # A wrong startxref offset: pypdf recovers and warns ("incorrect startxref pointer").
    (docs / "blank.pdf").write_bytes(head + b"startxref\n9" + tail.lstrip(b"\n0123456789"))
    configure("json", logging.INFO)
    store = EmbeddedStore(tmp_path / "s")
    capfd.readouterr()
    with capture_logs() as logs:
        summary = ingest([docs], store, embedder, progress=False)
    out, err = capfd.readouterr()
    assert summary.documents == 1 and [s.source for s in summary.skipped] == ["blank.pdf"]
    assert "startxref" not in err and "startxref" not in out
    warned = [e for e in logs if e["event"] == "library_warning"]
    assert warned and warned[0]["source"] == "blank.pdf" and warned[0]["log_level"] == "debug"
    assert any("startxref" in e["message"] for e in warned)
