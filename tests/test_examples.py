"""The sample collection and its labelled questions stay what examples/README.md says they are."""

from __future__ import annotations

import json
from collections import Counter

from search.glossary import Glossary
from tests.conftest import EXAMPLES

KINDS = {"paraphrase", "rare", "phrase", "alias", "unanswerable"}


def _items() -> list[dict]:
    return [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text().splitlines() if line.strip()]


def test_questions_are_well_formed_and_split():
    items = _items()
    assert len(items) >= 60
    assert len({i["id"] for i in items}) == len(items)
    assert {i["kind"] for i in items} == KINDS
    splits = Counter(i["split"] for i in items)
    assert set(splits) == {"dev", "heldout"} and splits["heldout"] >= 20
    for i in items:
        assert (i["kind"] == "unanswerable") == (i["must_contain"] == []), i["id"]


def test_every_answer_string_is_in_a_stored_chunk(examples_store):
    texts = [c.text for c in examples_store.iter_chunks()]
    for item in _items():
        for s in item["must_contain"]:
            assert any(s in t for t in texts), (item["id"], s)


def test_collection_size_and_formats(examples_store, embedder):
    chunks = examples_store.iter_chunks()
    sources = {c.source for c in chunks}
    assert len(sources) >= 30
    assert {s.rsplit(".", 1)[-1] for s in sources} >= {"md", "html", "txt", "pdf"}
    # Tokens of the collection, each paragraph counted once (overlaps stripped).
    total = sum(embedder.count_tokens(c.without_overlap_prev()) for c in chunks)
    assert total >= 40_000, total


def test_pdf_page_labels_differ_from_page_indices(examples_store):
    pdf = [c for c in examples_store.iter_chunks() if c.source.endswith(".pdf")]
    labels = {c.page for c in pdf}
    assert "1" in labels or any(label.startswith("1") for label in labels)
    assert all(c.page for c in pdf)
    # The first numbered section sits on the third physical page, printed "1".
    first = next(c for c in pdf if c.heading_path and c.heading_path[0].startswith("1."))
    assert first.page == "1"


def test_glossary_loads_with_definitions():
    g = Glossary.load(EXAMPLES / "glossary.csv")
    assert len(g.entries) >= 20
    assert sum(1 for e in g.entries if e.definition) >= 20
