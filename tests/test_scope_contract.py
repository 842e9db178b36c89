"""Scopes are access control inside the search, on both stores (real Elasticsearch).

The collection of tests/test_store_contract.py plus one "people" document that holds the
only mention of a rare name. Under a scope A, no read of any kind (either arm, a phrase or
rare-term lookup, document frequencies, the vocabulary, the chunk count) may see a chunk
of a source outside A, and the retriever built on them never returns one, including when
the outside source holds the only rare-term or phrase match.
"""

from __future__ import annotations

import numpy as np
import pytest

from search.glossary import Glossary, GlossaryEntry
from search.retrieve import Retriever
from search.scope import Scope, glob_regex
from search.types import LexicalQuery, WeightedTerms
from tests.test_store_contract import (  # noqa: F401 - fixtures
    ALL_DOCS,
    DIMS,
    E1,
    E3,
    STAMP,
    backend,
    chunk_ids,
    es_alias,
    es_url,
    make_doc,
    unit,
)

# The only chunks naming "Brandvold", the only "quarterly salary review", and near E1 (the
# kitchen's vector), so both arms would find them for a kitchen question.
PEOPLE = make_doc("people/reviews.md", [
    (("People", "Reviews"), "Oskar Brandvold runs the quarterly salary review with each lead.",
     [unit(1, 0.1, 0, 0)]),
    (("People", "Leave"), "Parental leave is twenty weeks; tell Brandvold a month ahead.", [E1]),
])
DOCS = [*ALL_DOCS, PEOPLE]
SITE_ONLY = Scope(("site/**",), "channels.CSITE")
NOT_PEOPLE = Scope(("*.md", "site/**"), "channels.CENG")
PEOPLE_ONLY = Scope(("people/**",), "channels.CPEOPLE")


@pytest.fixture()
def store(backend):  # noqa: F811 - the imported fixture, used
    writer = backend.open()
    writer.open_for(STAMP)
    for doc, chunks, windows in DOCS:
        writer.replace_document(doc, chunks, windows)
    writer.commit_ingest()
    return backend.open()


def sources_of(store, ids) -> set[str]:
    return {c.source for c in store.get_chunks(list(ids))}


# -- the glob language ----------------------------------------------------------------------
@pytest.mark.parametrize(("pattern", "source", "allowed"), [
    ("**", "anything/at/all.md", True),
    ("people/**", "people/reviews.md", True),
    ("people/**", "people/a/b.md", True),
    ("people/**", "peoples/reviews.md", False),
    ("people/**", "x/people/reviews.md", False),  # anchored at the start
    ("**/people/**", "people/reviews.md", True),  # "**/" also matches no folder at all
    ("**/people/**", "examples/handbook/people/reviews.md", True),
    ("*.md", "release.md", True),
    ("*.md", "site/annex.md", False),  # "*" stays within one segment
    ("site/?nnex.txt", "site/annex.txt", True),
    ("site/?nnex.txt", "site//nnex.txt", False),
    ("a+b(c).md", "a+b(c).md", True),  # regex characters are literal
    ("a+b(c).md", "aab(c).md", False),
])
def test_globs_match_whole_source_paths(pattern, source, allowed):
    assert Scope((pattern,)).allows(source) is allowed, glob_regex(pattern)


# -- every read of the store, under a scope -------------------------------------------------------
def test_each_store_read_sees_only_the_scope(store):
    site = chunk_ids(DOCS[2])
    assert store.chunk_count(scope=SITE_ONLY) == len(site) == 4
    assert store.chunk_count(scope=Scope(("**",))) == store.chunk_count() == 12
    # the dense arm: E1 is the kitchen's and the people's vector; under SITE_ONLY only site
    dense = store.dense(E1, 10, scope=SITE_ONLY)
    assert dense and {a for a, _ in dense} <= set(site)
    assert store.dense(E1, 3, scope=PEOPLE_ONLY)[0][0] == chunk_ids(PEOPLE)[1]
    # the lexical arm: "kettle" is only in the kitchen
    kettle = LexicalQuery((WeightedTerms(("kettle", "bollard")),))
    assert sources_of(store, [a for a, _ in store.lexical(kettle, 10)]) == {"kitchen.md", "site/annex.txt"}
    assert sources_of(store, [a for a, _ in store.lexical(kettle, 10, scope=SITE_ONLY)]) == {"site/annex.txt"}
    assert store.lexical(LexicalQuery((WeightedTerms(("kettle",)),)), 10, scope=SITE_ONLY) == []
    assert store.lexical(LexicalQuery((), (("herding cats", 1.0),)), 10, scope=SITE_ONLY) == []
    # phrases, document frequencies, the vocabulary
    assert store.phrase_matches(("salary", "review"), 3) == [chunk_ids(PEOPLE)[0]]
    assert store.phrase_matches(("salary", "review"), 3, scope=NOT_PEOPLE) == []
    assert store.doc_freqs(["brandvold", "bollard"]) == {"brandvold": 2, "bollard": 2}
    assert store.doc_freqs(["brandvold", "bollard"], scope=NOT_PEOPLE) == {"brandvold": 0, "bollard": 2}
    assert store.doc_freqs(["brandvold", "bollard"], scope=PEOPLE_ONLY) == {"brandvold": 2, "bollard": 0}
    vocab = store.vocabulary(scope=SITE_ONLY)
    assert "bollard" in vocab and "zurich" in vocab
    assert not vocab & {"kettle", "brandvold", "herding", "salary"}
    assert store.vocabulary(scope=Scope(())) == set() and store.chunk_count(scope=Scope(())) == 0
    # spelling candidates: "brandvolt" is one edit from a name only the people hold
    assert "brandvold" in store.spelling_candidates(["brandvolt"])["brandvolt"]
    assert "brandvold" not in store.spelling_candidates(["brandvolt"], scope=NOT_PEOPLE)["brandvolt"]
    assert store.phrase_matches_many([("salary", "review"), ("bollard",)], 3, scope=NOT_PEOPLE) == [
        [], store.phrase_matches(("bollard",), 3, scope=NOT_PEOPLE)]


@pytest.mark.parametrize("globs", [("site/**",), ("*.md",), ("**/reviews.md",), ("**/*.txt",),
                                   ("release.md", "people/*"), ("kitchen.m?",), ("nothing/**",)])
def test_the_stores_filter_exactly_what_the_globs_allow(store, globs):
    scope = Scope(globs)
    expected = [c.chunk_id for c in store.iter_chunks() if scope.allows(c.source)]
    assert store.chunk_count(scope=scope) == len(expected)
    assert sorted(a for a, _ in store.dense(E3, 50, scope=scope)) == sorted(expected)


# -- the retriever under a scope -------------------------------------------------------------
def fixed_vector(_question: str) -> np.ndarray:
    return E1  # every question "means" the kitchen and the people page


def test_a_rare_name_held_only_outside_the_scope_addresses_nothing(store):
    retriever = Retriever(store, fixed_vector, Glossary.empty())
    question = "What did Oskar Brandvold say about the quarterly salary review?"
    everywhere = retriever.retrieve(question)
    assert everywhere.support.addressed and everywhere.hits[0].chunk.source == "people/reviews.md"
    assert "rare:brandvold" in everywhere.addresses

    for scope in (NOT_PEOPLE, SITE_ONLY):
        scoped = retriever.retrieve(question, scope=scope)
        assert scoped.hits, "the scope's own passages are still candidates"
        assert all(scope.allows(h.chunk.source) for h in scoped.hits)
        assert "people/reviews.md" not in {h.chunk.source for h in scoped.hits}
        assert scoped.addresses == [] and not scoped.support.addressed
        assert "brandvold" in scoped.support.missing  # for the gate, the word is absent
        assert scoped.scope == scope
    # a typo of the name is not "corrected" towards a word only the people page holds
    assert retriever.retrieve("what about brandvoldt?", scope=NOT_PEOPLE).corrections == {}
    assert retriever.retrieve("what about brandvoldt?").corrections == {"brandvoldt": "brandvold"}


def test_alias_flood_counts_and_widening_stay_inside_the_scope(store):
    glossary = Glossary([GlossaryEntry("quarterly salary review", "pay talk")])
    retriever = Retriever(store, fixed_vector, glossary)
    scoped = retriever.retrieve("when is the pay talk?", scope=NOT_PEOPLE)
    assert all(NOT_PEOPLE.allows(h.chunk.source) for h in scoped.hits)
    assert retriever.spread("quarterly salary review", NOT_PEOPLE) == {}
    assert retriever.spread("quarterly salary review") == {"people/reviews.md": 1}
    leave = store.get_chunks([chunk_ids(PEOPLE)[1]])[0]
    assert retriever.boundary_neighbour(leave, ["salary"], SITE_ONLY) is None


# -- Share: what a conversation's scope covers is what the store lets it read -----------------
def test_the_share_check_covers_exactly_what_the_store_shows_under_the_scope(store):
    """Share posts an answer only where `uncovered` finds no source outside the scope
    (bot.slack.actions): on both stores, a source is covered exactly when a read under that
    scope sees its chunks, so the check agrees with the access control it stands in for."""
    from bot.slack.scopes import uncovered

    every = sorted({c.source for c in store.iter_chunks()})
    for scope in (SITE_ONLY, NOT_PEOPLE, PEOPLE_ONLY, Scope(("**",)), Scope(())):
        seen = sources_of(store, [a for a, _ in store.dense(E3, 50, scope=scope)])
        assert {s for s in every if not uncovered(scope, [s])} == seen, scope
    # an answer written under a person's wider table, shared where the default applies
    retriever = Retriever(store, fixed_vector, Glossary.empty())
    wide = retriever.retrieve("What did Oskar Brandvold say about the quarterly salary review?")
    cited = [h.chunk.source for h in wide.hits]
    assert uncovered(NOT_PEOPLE, cited) == ["people/reviews.md"]
    assert uncovered(Scope(("**",)), cited) == [] and uncovered(NOT_PEOPLE, [None, "kitchen.md"]) == []
    narrow = retriever.retrieve("What did Oskar Brandvold say about the quarterly salary review?",
                                scope=NOT_PEOPLE)
    assert uncovered(NOT_PEOPLE, [h.chunk.source for h in narrow.hits]) == []
