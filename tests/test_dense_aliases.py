"""Glossary aliases in the dense arm, on both stores: a question holding a glossary name is
embedded once more with the other name beside it, each chunk keeps its better score of
the two, a flooding alias is not embedded, and the gate's dense signal stays the plain
question's (docs/decisions/0032-aliases-in-the-dense-arm.md)."""

from __future__ import annotations

import pytest

from bot.testing.bench import ingest_handbook, ingest_handbook_into
from search.embedded import EmbeddedStore
from search.glossary import Expansion, Glossary, GlossaryEntry, with_other_names
from search.retrieve import Retriever
from tests.conftest import EXAMPLES
from tests.elastic_support import es_alias, es_url, open_elastic  # noqa: F401

QUESTION = "What does the Firehose take in every day?"
FLOODING = "How fast can a robot drive in a shared zone?"


class CountingEncoder:
    """The test embedder's encode_query, with every text it was asked to embed kept."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self.texts: list[str] = []

    def __call__(self, text: str):
        self.texts.append(text)
        return self.embedder.encode_query(text)


def test_the_other_name_is_written_beside_the_name_found():
    e = Expansion("the Firehose", "Telemetry Ingestion Pipeline", GlossaryEntry("x", "y"))
    assert with_other_names(QUESTION, [e]) == (
        "What does the Firehose (Telemetry Ingestion Pipeline) take in every day?")
    assert with_other_names("What does THE FIREHOSE take?", [e]) == (
        "What does THE FIREHOSE (Telemetry Ingestion Pipeline) take?")
    lost = Expansion("Firehose", "TIP", GlossaryEntry("x", "y"))
    assert with_other_names("Fire-hose?", [lost]) == "Fire-hose? (TIP)"


def _check_store(store, test_embedder) -> list[str]:
    """Every promise on one store; returns the alias question's dense top five."""
    glossary = Glossary.load(EXAMPLES / "glossary.csv")
    enc = CountingEncoder(test_embedder)
    with_aliases = Retriever(store, enc, glossary)
    without = Retriever(store, test_embedder.encode_query, Glossary.empty())

    r = with_aliases.retrieve(QUESTION, mode="dense", top_k=20)
    plain = without.retrieve(QUESTION, mode="dense", top_k=20)
    assert [e.expands_to for e in r.expansions] == ["Telemetry Ingestion Pipeline"]
    # One embedding for the question, one more for it with the other name beside the name.
    assert enc.texts[-2:] == [QUESTION, "What does the Firehose (Telemetry Ingestion Pipeline) take in every day?"]
    # Each chunk keeps its better score: never below the plain question's, and the chunks
    # that name the pipeline by its term come up.
    before = {h.chunk.chunk_id: h.dense_score for h in plain.hits}
    after = {h.chunk.chunk_id: h.dense_score for h in r.hits}
    assert all(after[c] >= s - 1e-6 for c, s in before.items() if c in after)
    raised = [h for h in r.hits if h.dense_score > before.get(h.chunk.chunk_id, -1.0) + 1e-6]
    assert raised and any("Telemetry Ingestion Pipeline" in h.chunk.text for h in raised)
    named = [h.chunk.chunk_id for h in r.hits[:5] if "Telemetry Ingestion Pipeline" in h.chunk.text]
    named_before = [h.chunk.chunk_id for h in plain.hits[:5] if "Telemetry Ingestion Pipeline" in h.chunk.text]
    assert len(named) > len(named_before)
    # The gate reads the plain question's dense score, whatever the aliases added.
    assert r.support.dense_top == plain.support.dense_top
    assert r.support.dense_z == plain.support.dense_z

    # A flooding alias is left out of the dense arm as of the lexical one: one embedding.
    enc.texts.clear()
    flooded = with_aliases.retrieve(FLOODING, mode="hybrid")
    assert "Quill" in flooded.flooded and not flooded.expansions
    assert enc.texts == [FLOODING]
    return [h.chunk.chunk_id for h in r.hits[:5]]


@pytest.mark.elasticsearch
def test_aliases_reach_the_dense_arm_alike_on_both_stores(tmp_path, test_embedder, es_url, es_alias):  # noqa: F811
    ingest_handbook(tmp_path / "store", test_embedder)
    embedded = EmbeddedStore(tmp_path / "store")
    ingest_handbook_into(open_elastic(es_url, es_alias), test_embedder)
    elastic = open_elastic(es_url, es_alias)
    try:
        top_embedded = _check_store(embedded, test_embedder)
        top_elastic = _check_store(elastic, test_embedder)
    finally:
        embedded.close()
        elastic.close()
    # Chunk ids are content hashes: the same chunks, ranked alike by the two stores.
    assert set(top_embedded) == set(top_elastic)
