"""Links inside an ingested folder never open a scope to another folder's text, on both stores.

A folder of company/ and people/ pages, and in company/ every kind of link to the people's
salaries (relative and absolute symbolic links, a chain of them, a link to the folder, a
hard link): ingested into the embedded store and into real Elasticsearch, a search under
`company/**` (each read of the store, and the retriever that `search` and `ask` use) never
sees a word of people/, and people/ text is stored under people/ names only.
"""

from __future__ import annotations

import os
from pathlib import Path

from ingest.pipeline import ingest
from search.glossary import Glossary
from search.retrieve import Retriever
from search.scope import Scope
from search.types import LexicalQuery, WeightedTerms
from tests.test_store_contract import backend, es_alias, es_url  # noqa: F401 - fixtures

COMPANY = Scope(("company/**",), "channels.CCOMPANY")
# Words only the people pages hold.
SECRET_WORDS = ("brandvold", "ninety", "salary")
QUESTION = "What salary does Oskar Brandvold earn, ninety thousand?"


def _folder(root: Path) -> Path:
    docs = root / "docs"
    (docs / "company").mkdir(parents=True)
    (docs / "people").mkdir()
    (docs / "company" / "values.md").write_text(
        "# Values\n\nWe ship calm software and answer every question with a source.\n")
    (docs / "people" / "salaries.md").write_text(
        "# Salaries\n\nOskar Brandvold earns ninety thousand; his salary is reviewed each spring.\n")
    (docs / "people" / "reviews.md").write_text(
        "# Reviews\n\nBrandvold runs the salary review; ninety days of notice apply.\n")
    company = docs / "company"
    (company / "notes.md").symlink_to("../people/salaries.md")
    (company / "absolute.md").symlink_to(docs / "people" / "salaries.md")
    (company / "chain.md").symlink_to("notes.md")
    (company / "staff").symlink_to("../people", target_is_directory=True)
    os.link(docs / "people" / "reviews.md", company / "hard.md")
    return docs


def _holding(store, words) -> set[str]:
    return {c.source for c in store.iter_chunks() if any(w in c.text.lower() for w in words)}


def test_a_company_scope_never_reads_people_text_through_a_link(backend, tmp_path, test_embedder):  # noqa: F811
    docs = _folder(tmp_path)
    summary = ingest([docs], backend.open(), test_embedder, progress=False)
    reasons = {s.source: s.reason for s in summary.skipped}
    assert set(reasons) == {"company/notes.md", "company/absolute.md", "company/chain.md", "company/staff",
                            "company/hard.md", "people/reviews.md"}
    assert reasons["company/notes.md"] == reasons["company/absolute.md"] == reasons["company/chain.md"] == (
        "symbolic link to people/salaries.md (not followed: a file is stored under its own name only)")
    assert reasons["company/staff"] == "symbolic link to the folder people (not followed)"
    assert reasons["company/hard.md"].startswith("hard link (one file, 2 names here: company/hard.md, "
                                                 "people/reviews.md)")

    store = backend.open()
    assert set(store.document_hashes()) == {"company/values.md", "people/salaries.md"}
    assert _holding(store, SECRET_WORDS) == {"people/salaries.md"}  # under its own name only
    # every read under the company's scope
    assert {c.source for c in store.iter_chunks() if COMPANY.allows(c.source)} == {"company/values.md"}
    words = LexicalQuery((WeightedTerms(SECRET_WORDS),))
    assert store.lexical(words, 10) and store.lexical(words, 10, scope=COMPANY) == []
    assert store.phrase_matches(("oskar", "brandvold"), 3, scope=COMPANY) == []
    assert store.doc_freqs(list(SECRET_WORDS), scope=COMPANY) == dict.fromkeys(SECRET_WORDS, 0)
    assert not store.vocabulary(scope=COMPANY) & set(SECRET_WORDS)
    vector = test_embedder.encode_query(QUESTION)
    assert {c.source for c in store.get_chunks([a for a, _ in store.dense(vector, 10, scope=COMPANY)])} == {
        "company/values.md"}
    # the retriever of `search` and `ask`
    retriever = Retriever(store, test_embedder.encode_query, Glossary.empty())
    everywhere = retriever.retrieve(QUESTION)
    assert "people/salaries.md" in {h.chunk.source for h in everywhere.hits}
    scoped = retriever.retrieve(QUESTION, scope=COMPANY)
    assert {h.chunk.source for h in scoped.hits} <= {"company/values.md"}
    assert not any(w in h.chunk.text.lower() for h in scoped.hits for w in SECRET_WORDS)
    assert scoped.addresses == [] and not scoped.support.addressed


def test_a_name_that_became_a_link_loses_what_was_stored_under_it(backend, tmp_path, test_embedder):  # noqa: F811
    """A store written while company/notes.md was a copy of the salaries (or by a version
    that followed links) no longer answers the company's scope with them once it is a link."""
    docs = _folder(tmp_path)
    for name in ("notes.md", "absolute.md", "chain.md", "hard.md", "staff"):
        (docs / "company" / name).unlink()
    (docs / "company" / "notes.md").write_text((docs / "people" / "salaries.md").read_text())
    first = ingest([docs], backend.open(), test_embedder, progress=False)
    assert first.skipped == [] and "company/notes.md" in backend.open().document_hashes()

    (docs / "company" / "notes.md").unlink()
    (docs / "company" / "notes.md").symlink_to("../people/salaries.md")
    again = ingest([docs], backend.open(), test_embedder, progress=False)
    assert [s.source for s in again.skipped] == ["company/notes.md"] and again.deleted == 1
    store = backend.open()
    assert set(store.document_hashes()) == {"company/values.md", "people/salaries.md", "people/reviews.md"}
    assert store.lexical(LexicalQuery((WeightedTerms(SECRET_WORDS),)), 10, scope=COMPANY) == []
