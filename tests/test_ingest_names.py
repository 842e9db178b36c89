"""Hostile names and swapped files at ingest: each is that one file (or folder) skipped with a
reason, the rest ingested; a file swapped for a link after discovery is never read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest.discovery import discover
from ingest.limits import read_file
from ingest.names import name_refusal, shown
from ingest.pipeline import ingest
from ingest.reading import read_found
from search.embedded import EmbeddedStore
from search.errors import IngestError


def _docs(root: Path) -> Path:
    docs = root / "docs"
    (docs / "company").mkdir(parents=True)
    (docs / "company" / "values.md").write_text("# Values\n\nWe ship calm software.\n")
    (docs / "good.md").write_text("# Good\n\nThe rover docks at the bay.\n")
    return docs


def _ingest(tmp_path: Path, docs: Path, embedder, paths: list[Path] | None = None):
    store = EmbeddedStore(tmp_path / "s")
    summary = ingest(paths or [docs], store, embedder, progress=False)
    return summary, set(store.document_hashes())


# -- a file swapped between discovery and the read ----------------------------------------------
def _outside(root: Path) -> Path:
    secret = root / "secret"
    secret.mkdir()
    (secret / "values.md").write_text("# Secret\n\nOutside the folder: the vault code is 4711.\n")
    return secret


def _found(docs: Path, source: str):
    found, _skipped = discover([docs])
    return next(f for f in found if f.source == source)


def test_a_file_swapped_for_a_link_out_of_the_folder_after_discovery_is_not_read(tmp_path):
    docs, secret = _docs(tmp_path), _outside(tmp_path)
    f = _found(docs, "company/values.md")
    f.path.unlink()
    f.path.symlink_to(secret / "values.md")
    with pytest.raises(IngestError, match=r"company/values\.md: replaced by a symbolic link since it was found"):
        read_found(f, {})


def test_a_folder_swapped_for_a_link_after_discovery_is_not_walked_into(tmp_path):
    docs, secret = _docs(tmp_path), _outside(tmp_path)
    f = _found(docs, "company/values.md")
    (docs / "company").rename(tmp_path / "moved")
    (docs / "company").symlink_to(secret, target_is_directory=True)
    with pytest.raises(IngestError, match="replaced by a symbolic link since it was found"):
        read_found(f, {})


def test_a_file_replaced_by_another_after_discovery_is_not_read(tmp_path):
    docs, secret = _docs(tmp_path), _outside(tmp_path)
    f = _found(docs, "company/values.md")
    os.replace(secret / "values.md", f.path)  # another inode under the same name
    with pytest.raises(IngestError, match="replaced by another file since it was found"):
        read_file(f.path, f.source, at=f.at)
    assert read_found(_found(docs, "company/values.md"), {}).doc is not None  # found again, it is read


# -- symbolic link loops -------------------------------------------------------------------------
def test_a_symlink_loop_is_skipped_with_a_reason_and_the_rest_ingested(tmp_path, test_embedder):
    docs = _docs(tmp_path)
    (docs / "a.md").symlink_to("b.md")
    (docs / "b.md").symlink_to("a.md")
    (docs / "self.md").symlink_to("self.md")
    (docs / "company" / "x").symlink_to("y")
    (docs / "company" / "y").symlink_to("x")
    summary, stored = _ingest(tmp_path, docs, test_embedder)
    loop = "symbolic link loop (not followed)"
    assert {s.source: s.reason for s in summary.skipped} == {
        "a.md": loop, "b.md": loop, "self.md": loop, "company/x": loop, "company/y": loop}
    assert stored == {"good.md", "company/values.md"}


# -- names ----------------------------------------------------------------------------------
def test_a_name_that_is_not_utf8_is_skipped_with_its_bytes_shown(tmp_path, test_embedder):
    docs = _docs(tmp_path)
    with open(os.path.join(os.fsencode(docs), b"caf\xe9.md"), "wb") as out:
        out.write(b"# Cafe\n\nCoffee at ten.\n")
    os.mkdir(os.path.join(os.fsencode(docs), b"d\xfcr"))
    with open(os.path.join(os.fsencode(docs), b"d\xfcr", b"in.md"), "wb") as out:
        out.write(b"# In\n\nInside a folder of a Latin-1 name.\n")
    summary, stored = _ingest(tmp_path, docs, test_embedder)
    reasons = {s.source: s.reason for s in summary.skipped}
    assert reasons == {
        "b'caf\\xe9.md'": "the name b'caf\\xe9.md' is not UTF-8 (a store holds UTF-8 names only); "
                          "rename it to ingest it",
        "b'd\\xfcr'": "folder left out: the name b'd\\xfcr' is not UTF-8 (a store holds UTF-8 names only); "
                      "rename it to ingest it",
    }
    assert summary.as_json()["skipped"]  # the summary prints (no surrogate reaches its JSON)
    assert stored == {"good.md", "company/values.md"}


FORGING = ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\x9b", "\u2028", "\u2029",
           "\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c"]


@pytest.mark.parametrize("ch", FORGING, ids=[f"U+{ord(c):04X}" for c in FORGING])
def test_a_name_with_a_control_separator_or_bidi_character_is_refused(tmp_path, test_embedder, ch):
    docs = _docs(tmp_path)
    name = f"notes{ch}source: people{ch}salaries.md"
    (docs / "company" / name).write_text("# Notes\n\nA forged provenance line.\n")
    (docs / f"dir{ch}x").mkdir()
    (docs / f"dir{ch}x" / "in.md").write_text("# In\n\nUnder a forged folder name.\n")
    summary, stored = _ingest(tmp_path, docs, test_embedder)
    reasons = {s.source: s.reason for s in summary.skipped}
    escaped = repr(f"company/{name}")
    assert set(reasons) == {escaped, repr(f"dir{ch}x")}
    assert f"the name {name!r} holds U+{ord(ch):04X}" in reasons[escaped]
    assert reasons[repr(f"dir{ch}x")].startswith(f"folder left out: the name {f'dir{ch}x'!r} holds")
    assert all(s.isprintable() for r in summary.skipped for s in (r.source, r.reason))
    assert stored == {"good.md", "company/values.md"}


def test_a_file_named_on_the_command_line_with_a_line_break_is_refused(tmp_path, test_embedder):
    docs = _docs(tmp_path)
    bad = docs / "x\nsource: people salaries.md"
    bad.write_text("# X\n\nForged.\n")
    summary, stored = _ingest(tmp_path, docs, test_embedder, [bad, docs / "good.md"])
    assert [s.source for s in summary.skipped] == [repr(bad.name)]
    assert stored == {"good.md"}


def test_ordinary_names_pass_and_show_as_they_are():
    for name in ("company/values.md", "café/Straße/日本語.md", "a b (c) [d].md", "emoji-🙂.md"):
        assert name_refusal(name) is None and shown(name) == name
