"""Words the writer quoted are the documents' own: a quoted phrase or word the collection
holds rarely is an address (search.text.quoted_terms, docs/decisions/0069-quoted-words.md)."""

from __future__ import annotations

import pytest

from search.glossary import Glossary
from search.retrieval_config import RetrievalConfig
from search.retrieve import Retriever
from search.text import quoted_terms
from tests.elastic_support import es_alias, es_url, open_elastic  # noqa: F401 (fixtures)


def test_quotations_of_every_kind_are_read_and_apostrophes_are_not():
    assert quoted_terms("what's this 'soft exit' thing people mention about the break?") == [("soft", "exit")]
    assert quoted_terms('what does "Use or Lose" mean next to my balance') == [("use", "or", "lose")]
    assert quoted_terms("“curly quotes” and ‘single curly’ and `git bisect`") == [
        ("curly", "quotes"), ("single", "curly"), ("git", "bisect")]
    # An apostrophe inside a word or after one opens and closes nothing.
    assert quoted_terms("the teams' 'core hours' policy, it's fine") == [("core", "hours")]
    assert quoted_terms("someone replied 'we don't do that here' in a thread") == [
        ("we", "don", "t", "do", "that", "here")]
    assert quoted_terms("the docs call it a \"misfeature\" and a 'misfeature'") == [("misfeature",)]


def test_an_empty_quotation_holds_nothing_and_a_nested_one_is_read():
    # The closer right after the opener ends the quotation: the words after it were read
    # as the start of the next one ("and soft exit", the quoted phrase lost).
    assert quoted_terms("'' and 'soft exit'") == [("soft", "exit")]
    assert quoted_terms('an empty string "" is what "soft exit" gives') == [("soft", "exit")]
    assert quoted_terms("`` then `git bisect`") == [("git", "bisect")]
    assert quoted_terms("```git bisect```") == [("git", "bisect")]
    # A quotation inside a quotation is the writer's too, one level deep.
    assert quoted_terms("he said \"we call it 'soft exit' here\"") == [
        ("we", "call", "it", "soft", "exit", "here"), ("soft", "exit")]
    assert quoted_terms("“they said ‘golden handcuffs’”") == [("they", "said", "golden", "handcuffs"), ("golden", "handcuffs")]


def test_what_is_not_a_quotation():
    assert quoted_terms("an unclosed 'quote runs on") == []
    assert quoted_terms("a quote 'that runs\nonto the next line'") == []
    assert quoted_terms("'" + "x" * 300 + "'") == []  # a passage, not a term
    assert quoted_terms("'' \"\" ``") == []
    assert quoted_terms("it's the teams' and the users' call") == []


def _corpus(docs):
    docs.mkdir()
    filler = "A soft launch is planned. The exit interview is held by people ops. " * 3
    for i in range(6):
        (docs / f"page-{i}.md").write_text(f"# Page {i}\n\n{filler}\n\nThe soft skills course has an exit survey.\n")
    (docs / "leave.md").write_text(
        "# Long leave\n\nAfter five years you may take a soft exit: three months away, your role kept.\n")
    (docs / "sql.md").write_text(
        "# Strings\n\nDouble-quoted strings as identifiers are a misfeature kept for old schemas.\n")


def test_a_quotation_of_stopwords_addresses_nothing_and_the_gate_still_refuses(tmp_path, test_embedder):
    from bot.answer.gate import REFUSED, Gate
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(8):
        (docs / f"p{i}.md").write_text(f"# Page {i}\n\nOur team meets weekly. Expenses need receipts.\n")
    (docs / "values.md").write_text("# Values\n\nKindness is a habit we keep.\n")
    store = EmbeddedStore(tmp_path / "store")
    ingest([docs], store, test_embedder, progress=False, within=docs)
    try:
        # "is a" is held by one chunk: quoted, it was an address, and the gate answered.
        r = Retriever(store, test_embedder.encode_query, Glossary.empty()).retrieve(
            "what will the weather be in 'is a' town tomorrow")
        assert r.addresses == [] and Gate().judge(r.support).outcome == REFUSED
    finally:
        store.close()


def _check(store, embedder):
    on = Retriever(store, embedder.encode_query, Glossary.empty())
    off = Retriever(store, embedder.encode_query, Glossary.empty(), RetrievalConfig(quoted_rule=False))
    question = "what's this 'soft exit' thing people mention??"
    r = on.retrieve(question)
    assert "phrase:soft exit" in r.addresses
    assert r.hits[0].chunk.source == "leave.md" and r.hits[0].reasons == ["address"]
    assert not any(a.startswith("phrase:") for a in off.retrieve(question).addresses)
    # An empty quotation before it leaves the quoted phrase as it is.
    assert "phrase:soft exit" in on.retrieve("what's '' and 'soft exit' then").addresses
    # Unquoted, two ordinary words are no phrase address either.
    assert not any(a.startswith("phrase:") for a in on.retrieve("what's this soft exit thing people mention??").addresses)
    # A quoted word the collection holds rarely is a term, as a name is; unquoted it is one vote.
    word = on.retrieve("the docs call something a 'misfeature', what's their beef with it")
    assert "rare:misfeature" in word.addresses and word.hits[0].chunk.source == "sql.md"
    assert not any(a.startswith("rare:") for a in on.retrieve("the docs call something a misfeature").addresses)


def test_a_quoted_phrase_addresses_the_passage_that_holds_it(tmp_path, test_embedder):
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    _corpus(tmp_path / "docs")
    store = EmbeddedStore(tmp_path / "store")
    ingest([tmp_path / "docs"], store, test_embedder, progress=False, within=tmp_path / "docs")
    try:
        _check(store, test_embedder)
    finally:
        store.close()


@pytest.mark.elasticsearch
def test_a_quoted_phrase_addresses_its_passage_on_elasticsearch(tmp_path, test_embedder, es_url, es_alias):  # noqa: F811
    from ingest.pipeline import ingest

    _corpus(tmp_path / "docs")
    store = open_elastic(es_url, es_alias)
    ingest([tmp_path / "docs"], store, test_embedder, progress=False, within=tmp_path / "docs")
    try:
        _check(store, test_embedder)
    finally:
        store.close()
